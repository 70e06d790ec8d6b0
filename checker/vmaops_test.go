package checker

import (
	"slices"
	"strings"
	"testing"
)

// vmaRule is one prediction of the model for the VMA operations of issue
// 31 on a kernel release: operation op of the program may return exactly
// the errnos want (nil: any, the model does not know).
type vmaRule struct {
	name, text string
	op         int
	kernel     string
	want       []int
}

const vmaRuleHead = "forkfuzz v1\nregion r0 anon-private pages=8\nregion r1 memfd-private pages=8\nregion r2 memfd-shared pages=8\nregion r3 anon-shared pages=8\n"

var vmaRules = []vmaRule{
	// MADV_POPULATE_*: Linux 6.1 walks the VMAs (a hole is ENOMEM at the
	// end, a later PROT_NONE VMA stops it with EINVAL); 6.9+ stops at the
	// hole.
	{"populate-hole-then-protnone-6.1", "munmap r0 off=0x1000 len=0x1000\nmprotect r0 off=0x2000 len=0x1000 prot=none\nmadvise r0 off=0x0 len=0x4000 advice=populate_read", 2, "6.1.192", []int{eINVAL}},
	{"populate-hole-then-protnone-6.18", "munmap r0 off=0x1000 len=0x1000\nmprotect r0 off=0x2000 len=0x1000 prot=none\nmadvise r0 off=0x0 len=0x4000 advice=populate_read", 2, "6.18.44", []int{eNOMEM}},
	{"populate-hole-6.1", "munmap r0 off=0x1000 len=0x1000\nmadvise r0 off=0x0 len=0x4000 advice=populate_write", 1, "6.1.192", []int{eNOMEM}},
	{"populate-write-readonly", "mprotect r2 off=0x0 len=0x1000 prot=r\nmadvise r2 off=0x0 len=0x4000 advice=populate_write", 1, "", []int{eINVAL}},
	{"populate-read-readonly", "mprotect r2 off=0x0 len=0x1000 prot=r\nmadvise r2 off=0x0 len=0x4000 advice=populate_read", 1, "", []int{eOK}},
	{"populate-before-5.14", "madvise r0 off=0x0 len=0x4000 advice=populate_read", 0, "5.10.0", []int{eINVAL}},
	{"populate-locked", "mlock r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x4000 advice=populate_write", 1, "", []int{eOK}},
	{"dontneed-locked", "mlock r0 off=0x0 len=0x4000\nmadvise r0 off=0x0 len=0x4000 advice=dontneed_locked", 1, "6.1.192", []int{eOK}},
	{"dontneed-locked-before-5.18", "madvise r0 off=0x0 len=0x4000 advice=dontneed_locked", 0, "5.15.0", []int{eINVAL}},
}

func TestVMAOpRules(t *testing.T) {
	for _, c := range vmaRules {
		t.Run(c.name, func(t *testing.T) {
			p := mustParse(t, vmaRuleHead+strings.TrimSpace(c.text)+"\n")
			s, err := NewSpec(p, c.kernel)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Findings) > 0 {
				t.Fatalf("the model's findings on its own expected run: %v", s.Findings)
			}
			got := s.Ops[c.op]
			if !got.Judged || !slices.Equal(got.Errnos, c.want) {
				t.Errorf("op %d `%v` on %q: errnos %v (%s), want %v", c.op, p.Ops[c.op], c.kernel, got.Errnos, got.Why, c.want)
			}
		})
	}
}

// TestPopulateWriteCopiesFilePages: after MADV_POPULATE_WRITE a private
// file mapping holds private copies, so a later write to the file no
// longer shows through it; after MADV_POPULATE_READ it still does.
func TestPopulateWriteCopiesFilePages(t *testing.T) {
	for _, c := range []struct {
		advice string
		shows  bool
	}{{"populate_write", false}, {"populate_read", true}} {
		p := mustParse(t, vmaRuleHead+"madvise r1 off=0x0 len=0x4000 advice="+c.advice+"\npwrite r1 off=0x1008 count=1 stride=0x8\ncheck\n")
		o := Expected(p)
		v := findView(t, o, 0, 2)
		if got := wordAt(v, 1, 0x1008) != 0; got != c.shows {
			t.Errorf("%s: the file write shows through the private mapping: %v, want %v", c.advice, got, c.shows)
		}
	}
}
