package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// remapRules are the model's errnos for remap_file_pages (remapfile.go)
// over vmaRuleHead's regions: r0 anon-private, r1 memfd-private, r2
// memfd-shared, r3 anon-shared, 8 pages each.
var remapRules = []vmaRule{
	{"memfd-shared", "remapfile r2 off=0x0 len=0x2000 pgoff=0x4", 0, "", []int{eOK}},
	{"anon-shared", "remapfile r3 off=0x1000 len=0x2000 pgoff=0x0", 0, "", []int{eOK}},
	{"anon-private", "remapfile r0 off=0x0 len=0x1000 pgoff=0x0", 0, "", []int{eINVAL}},
	{"memfd-private", "remapfile r1 off=0x0 len=0x1000 pgoff=0x1", 0, "", []int{eINVAL}},
	{"less-than-a-page", "remapfile r2 off=0x0 len=0xfff pgoff=0x1", 0, "", []int{eINVAL}},
	{"zero-length", "remapfile r2 off=0x0 len=0x0 pgoff=0x1", 0, "", []int{eINVAL}},
	{"unaligned-rounded-down", "remapfile r2 off=0x8 len=0x1800 pgoff=0x1", 0, "", []int{eOK}},
	{"past-eof", "remapfile r3 off=0x0 len=0x4000 pgoff=0x6", 0, "", []int{eOK}},
	{"past-memfd-end", "remapfile r2 off=0x0 len=0x2000 pgoff=0x10000", 0, "", []int{eOK}},
	{"hole-at-start", "munmap r2 off=0x0 len=0x1000\nremapfile r2 off=0x0 len=0x2000 pgoff=0x0", 1, "", []int{eINVAL}},
	{"across-hole", "munmap r2 off=0x2000 len=0x1000\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, "", []int{eINVAL}},
	{"past-region-end", "remapfile r2 off=0x6000 len=0x4000 pgoff=0x0", 0, "", []int{eINVAL}},
	{"to-region-end", "remapfile r2 off=0x6000 len=0x2000 pgoff=0x0", 0, "", []int{eOK}},
	{"across-mprotect", "mprotect r2 off=0x1000 len=0x1000 prot=r\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, "", []int{eINVAL}},
	{"from-readonly", "mprotect r2 off=0x0 len=0x1000 prot=r\nremapfile r2 off=0x0 len=0x1000 pgoff=0x5", 1, "", []int{eOK}},
	{"protnone", "mprotect r3 off=0x0 len=0x8000 prot=none\nremapfile r3 off=0x0 len=0x2000 pgoff=0x5", 1, "", []int{eOK}},
	{"across-mlock", "mlock r2 off=0x0 len=0x1000\nremapfile r2 off=0x0 len=0x2000 pgoff=0x0", 1, "", []int{eINVAL}},
	{"locked", "mlock r2 off=0x0 len=0x2000\nremapfile r2 off=0x0 len=0x2000 pgoff=0x3", 1, "", []int{eOK}},
	{"stays-locked", "mlock r2 off=0x0 len=0x1000\nremapfile r2 off=0x0 len=0x1000 pgoff=0x3\nremapfile r2 off=0x0 len=0x2000 pgoff=0x0", 2, "", []int{eINVAL}},
	{"onfault-vs-mlock", "mlockonfault r3 off=0x0 len=0x1000\nmlock r3 off=0x1000 len=0x1000\nremapfile r3 off=0x0 len=0x2000 pgoff=0x0", 2, "", []int{eINVAL}},
	{"onfault-dropped", "mlockonfault r3 off=0x0 len=0x1000\nmlock r3 off=0x1000 len=0x1000\nremapfile r3 off=0x0 len=0x1000 pgoff=0x0\nremapfile r3 off=0x0 len=0x2000 pgoff=0x0", 3, "", []int{eOK}},
	{"across-mbind", "mbind r2 off=0x1000 len=0x1000 policy=bind\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, "", []int{eOK}},
	{"across-dontfork", "madvise r3 off=0x1000 len=0x1000 advice=dontfork\nremapfile r3 off=0x0 len=0x4000 pgoff=0x0", 1, "", []int{eINVAL}},
	{"across-hugepage", "madvise r2 off=0x1000 len=0x1000 advice=hugepage\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, "", []int{eINVAL}},
	{"advice-dropped", "madvise r3 off=0x1000 len=0x1000 advice=dontfork\nremapfile r3 off=0x1000 len=0x1000 pgoff=0x1\nremapfile r3 off=0x0 len=0x4000 pgoff=0x0", 2, "", []int{eOK}},
	{"across-remapped", "remapfile r2 off=0x1000 len=0x1000 pgoff=0x20\nremapfile r2 off=0x0 len=0x4000 pgoff=0x0", 1, "", []int{eOK}},
	{"across-another-object", "munmap r3 off=0x4000 len=0x4000\nmmap r3 off=0x4000 len=0x4000\nremapfile r3 off=0x3000 len=0x2000 pgoff=0x0", 2, "", []int{eINVAL}},
	{"memfd-mmap-again", "munmap r2 off=0x4000 len=0x4000\nmmap r2 off=0x4000 len=0x4000\nremapfile r2 off=0x3000 len=0x2000 pgoff=0x0", 2, "", []int{eOK}},
	{"in-child", "fork f0\nf0: remapfile r2 off=0x0 len=0x2000 pgoff=0x4\nf0: remapfile r0 off=0x0 len=0x2000 pgoff=0x4\nwait f0", 1, "", []int{eOK}},
	{"child-unlocked", "mlock r2 off=0x0 len=0x1000\nfork f0\nf0: remapfile r2 off=0x0 len=0x2000 pgoff=0x4\nwait f0", 2, "", []int{eOK}},
}

func TestRemapFileRules(t *testing.T) {
	for _, c := range remapRules {
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
				t.Errorf("op %d `%v`: errnos %v (%s), want %v", c.op, p.Ops[c.op], got.Errnos, got.Why, c.want)
			}
		})
	}
}

// TestRemapFileContent: after remapfile the range shows the object's
// pages from pgoff on, a store through it lands in the object (a child
// forked afterwards sees both), and pages past the object's end are
// beyond EOF.
func TestRemapFileContent(t *testing.T) {
	p := mustParse(t, vmaRuleHead+"pwrite r2 off=0x5008 count=1 stride=0x8\nstore r3 off=0x7010 count=1 stride=0x8\n"+
		"remapfile r2 off=0x0 len=0x1000 pgoff=0x5\nremapfile r3 off=0x2000 len=0x3000 pgoff=0x6\n"+
		"store r2 off=0x10 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\ncheck\n")
	o := Expected(p)
	if v := Check(p, o); !v.OK() {
		t.Fatalf("the expected run fails:\n%s", v.Report())
	}
	for _, c := range []struct{ proc, at int }{{1, 6}, {0, 8}} {
		v := findView(t, o, c.proc, c.at)
		for _, w := range []struct {
			region int
			off    uint64
			want   uint64
		}{
			{2, 0x8, prog.SlotValue(0, 0)},    // the file's page 5 through page 0
			{2, 0x5008, prog.SlotValue(0, 0)}, // and where it always was
			{2, 0x10, prog.SlotValue(4, 0)},   // a store through page 0 ...
			{2, 0x5010, prog.SlotValue(4, 0)}, // ... is in page 5
			{3, 0x3010, prog.SlotValue(1, 0)}, // the shmem object's page 7 at page 3
		} {
			if got := wordAt(v, w.region, w.off); got != w.want {
				t.Errorf("proc %d view at %d: r%d %#x holds %#x, want %#x", c.proc, c.at, w.region, w.off, got, w.want)
			}
		}
		// r3's object has 8 pages: page 4 shows its page 8, past the end.
		if st := stateOf(v, 3, 4); st != obs.BeyondEOF {
			t.Errorf("proc %d: r3 page 4 is %v, want beyond EOF", c.proc, st)
		}
		if st := stateOf(v, 3, 3); st != obs.Readable {
			t.Errorf("proc %d: r3 page 3 is %v, want readable", c.proc, st)
		}
	}
	// A view that shows the old content of page 0 is a finding.
	v := findView(t, o, 1, 6)
	setWord(v, 2, 0x8, 0)
	if Check(p, o).OK() {
		t.Errorf("a child that does not see the remapped page passes")
	}
}

// stateOf returns the state of a page of a view (0: unmapped).
func stateOf(v *obs.View, region, page int) obs.PageState {
	for _, r := range v.Runs {
		if r.Region == region && page >= r.First && page < r.First+r.N {
			return r.State
		}
	}
	return 0
}

// TestRemapFileUnknown: over pages the model lost track of (an munmap
// that failed unexpectedly), any result of remapfile is accepted.
func TestRemapFileUnknown(t *testing.T) {
	p := mustParse(t, vmaRuleHead+"munmap r2 off=0x1000 len=0x1000\nremapfile r2 off=0x0 len=0x4000 pgoff=0x4\ncheck\n")
	for _, e := range []int{eOK, eINVAL} {
		o := Expected(p)
		o.Ops[0].Errno = eNOMEM
		o.Ops[1].Errno = e
		for _, f := range Check(p, o).Findings {
			if f.Op == 1 {
				t.Errorf("errno %d: %s", e, f.Explanation)
			}
		}
	}
}

// TestRemapFileHugetlb: remapfile of hugetlb pages is not modelled: its
// result is not predicted and the range is forgotten.
func TestRemapFileHugetlb(t *testing.T) {
	p := mustParse(t, "forkfuzz v1\nregion r0 hugetlb-shared pages=512\nstore r0 off=0x0 count=1 stride=0x8\nremapfile r0 off=0x0 len=0x200000 pgoff=0x0\ncheck\n")
	s, err := NewSpec(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Ops[1]; got.Judged && len(got.Errnos) > 0 {
		t.Errorf("remapfile of hugetlb pages: errnos %v (%s), want none predicted", got.Errnos, got.Why)
	}
	o := Expected(p)
	o.Ops[1].Errno = eINVAL
	if v := Check(p, o); !v.OK() {
		t.Errorf("an EINVAL from remapfile of hugetlb pages is a finding:\n%s", v.Report())
	}
}
