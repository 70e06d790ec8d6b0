package checker

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUffdMissRules: what a uffdreg's or uffdunreg's outcome does to the
// model, seen through an mremap that grows across the registered page
// (one VMA: it grows; two: EFAULT).
func TestUffdMissRules(t *testing.T) {
	const head = "forkfuzz v1\nregion r0 anon-private pages=8\nregion r1 memfd-private pages=8\n"
	const across = "mremap r0 off=0x6000 len=0x2000 newlen=0x3000 flags=none\n"
	cases := []struct {
		name   string
		text   string
		errnos map[int]int // the kernel's answers to set in the observation
		mremap int         // the mremap's index
		ok     []int       // mremap results the model must accept
		bad    []int       // and those it must reject
		note   string      // a note the verdict must carry
	}{
		{"registered-splits", "uffdreg r0 off=0x7000 len=0x1000\n" + across, nil, 1, []int{eFAULT}, []int{eOK}, ""},
		{"refused-changes-nothing", "uffdreg r0 off=0x7000 len=0x1000\n" + across, map[int]int{0: eINVAL}, 1, []int{eOK}, []int{eFAULT}, ""},
		{"enomem-may-be-half-done", "uffdreg r0 off=0x7000 len=0x1000\n" + across, map[int]int{0: eNOMEM}, 1, []int{eOK, eFAULT}, nil, ""},
		// Whether the two VMAs merge again is not predicted, but one is
		// possible (a registration left behind would make it EFAULT).
		{"unregistered-may-merge", "uffdreg r0 off=0x7000 len=0x1000\nuffdunreg r0 off=0x7000 len=0x1000\n" + across, nil, 2, []int{eOK}, nil, ""},
		{"refused-unregistration-keeps-it", "uffdreg r0 off=0x7000 len=0x1000\nuffdunreg r0 off=0x7000 len=0x1000\n" + across, map[int]int{1: eINVAL}, 2, []int{eFAULT}, []int{eOK}, ""},
		{"whole-range-is-one", "uffdreg r0 off=0x0 len=0x8000\n" + across, nil, 1, []int{eOK}, []int{eFAULT}, ""},
		{"private-file-forgotten", "pwrite r1 off=0x0 count=1 stride=0x8\nuffdreg r1 off=0x0 len=0x2000\ncheck\n" + across, nil, 3, []int{eOK}, nil, "registers a private file mapping"},
		{"pin-forgotten", "uffdreg r0 off=0x0 len=0x8000\nuringreg r0 off=0x0 len=0x2000\n" + across, nil, 2, []int{eOK}, nil, "through GUP"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustParse(t, head+c.text)
			try := func(e int, want bool) {
				o := Expected(p)
				for i, errno := range c.errnos {
					o.Ops[i].Errno = errno
				}
				o.Ops[c.mremap].Errno, o.Ops[c.mremap].Ret = e, ^uint64(0)
				if e == eOK {
					o.Ops[c.mremap].Ret = uint64(gaddr(gpage(0, 0x6000)))
				}
				v := Check(p, o)
				accepted := true
				for _, f := range v.Findings {
					accepted = accepted && f.Op != c.mremap
				}
				if accepted != want {
					t.Errorf("mremap errno %d: accepted %v, want %v\n%s", e, accepted, want, v.Report())
				}
				if c.note != "" && !strings.Contains(strings.Join(v.Notes, "\n"), c.note) {
					t.Errorf("no note %q in:\n%s", c.note, strings.Join(v.Notes, "\n"))
				}
			}
			for _, e := range c.ok {
				try(e, true)
			}
			for _, e := range c.bad {
				try(e, false)
			}
		})
	}
}

// TestUffdRecorded: the host test's uffd programs (checker/hosttest
// TestVMAOps uffd*) and two more (hugetlb, THP, tmpfs, ext4), recorded on
// the reference 6.1.192 in QEMU (`forkfuzz exec --target qemu --json`,
// the observation without its coverage), pass; and 6.1 does what the
// rules expect of it: io_uring's registration over missing registered
// pages fails (EFAULT) instead of waiting for the handler, an ext4
// mapping cannot register (EINVAL).
func TestUffdRecorded(t *testing.T) {
	errnos := map[string]map[int]int{
		"uffdreg-uringreg":  {1: eFAULT},
		"uffdreg-thp-tmpfs": {4: eINVAL},
		"uffdreg-split":     {1: eFAULT},
	}
	for _, r := range loadRecorded(t, "testdata/uffd61/*.ffz") {
		if v := Check(r.p, &r.o); !v.OK() {
			t.Errorf("%s on %s:\n%s", r.file, r.o.Kernel, v.Report())
		}
		name := strings.TrimSuffix(filepath.Base(r.file), ".ffz")
		for i, e := range errnos[name] {
			if got := r.o.Ops[i].Errno; got != e {
				t.Errorf("%s: op %d errno %d, want %d", r.file, i, got, e)
			}
		}
	}
}
