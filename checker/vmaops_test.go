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
	// PR_SET_VMA_ANON_NAME: shmem is named since 6.2; files never; a
	// hole is ENOMEM after the walk, a file stops it.
	{"anonname-shmem-6.1", "anonname r3 off=0x0 len=0x1000 name=a", 0, "6.1.192", []int{eBADF}},
	{"anonname-shmem-6.18", "anonname r3 off=0x0 len=0x1000 name=a", 0, "6.18.44", []int{eOK}},
	{"anonname-memfd", "anonname r1 off=0x0 len=0x1000 name=none", 0, "", []int{eBADF}},
	{"anonname-hole", "munmap r0 off=0x1000 len=0x1000\nanonname r0 off=0x0 len=0x4000 name=b", 1, "", []int{eNOMEM}},
	{"anonname-unaligned", "anonname r0 off=0x8 len=0x1000 name=a", 0, "", []int{eINVAL}},
	// mlock2(MLOCK_ONFAULT) populates nothing: no ENOMEM for PROT_NONE.
	{"onfault-protnone", "mprotect r0 off=0x0 len=0x1000 prot=none\nmlockonfault r0 off=0x0 len=0x4000", 1, "", []int{eOK}},
	{"mlock-protnone", "mprotect r0 off=0x0 len=0x1000 prot=none\nmlock r0 off=0x0 len=0x4000", 1, "", []int{eNOMEM}},
	{"onfault-split-mremap", "mlock r0 off=0x0 len=0x7000\nmlockonfault r0 off=0x7000 len=0x1000\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 2, "", []int{eFAULT}},
	// mbind: EFAULT for a hole anywhere; a policy keeps VMAs apart.
	{"mbind-hole", "munmap r2 off=0x7000 len=0x1000\nmbind r2 off=0x0 len=0x8000 policy=interleave", 1, "", []int{eFAULT}},
	{"mbind-default-hole", "munmap r2 off=0x7000 len=0x1000\nmbind r2 off=0x0 len=0x8000 policy=default", 1, "", []int{eOK}},
	{"mbind-default-nothing", "munmap r2 off=0x0 len=0x2000\nmbind r2 off=0x0 len=0x2000 policy=default", 1, "", []int{eFAULT}},
	{"mbind-split-mremap", "mbind r0 off=0x7000 len=0x1000 policy=preferred\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 1, "6.1.192", []int{eFAULT}},
	{"mbind-same-merges", "mbind r0 off=0x7000 len=0x1000 policy=bind\nmbind r0 off=0x6000 len=0x1000 policy=bind\nmremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none", 2, "", []int{eOK, eFAULT}}, // the model cannot tell a merge
	// process_madvise: madvise's rules, but an empty iovec is nothing.
	{"pmadvise-empty-unaligned", "pmadvise r0 off=0x8 len=0x0 advice=cold", 0, "", []int{eOK}},
	{"pmadvise-unaligned", "pmadvise r0 off=0x8 len=0x1000 advice=cold", 0, "", []int{eINVAL}},
	{"pmadvise-locked", "mlockonfault r0 off=0x0 len=0x1000\npmadvise r0 off=0x0 len=0x1000 advice=pageout", 1, "", []int{eINVAL}},
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

// TestPMadviseBytes: a process_madvise that succeeds must have advised
// the whole iovec.
func TestPMadviseBytes(t *testing.T) {
	p := mustParse(t, vmaRuleHead+"pmadvise r0 off=0x0 len=0x3000 advice=cold\ncheck\n")
	o := Expected(p)
	if o.Ops[0].Ret != 0x3000 {
		t.Fatalf("expected ret %#x, want 0x3000", o.Ops[0].Ret)
	}
	if v := Check(p, o); !v.OK() {
		t.Fatalf("the expected run fails:\n%s", v.Report())
	}
	o.Ops[0].Ret = 0x1000
	v := Check(p, o)
	found := false
	for _, f := range v.Findings {
		found = found || f.Signature == "errno:pmadvise-bytes"
	}
	if !found {
		t.Errorf("a short process_madvise passes:\n%s", v.Report())
	}
}
