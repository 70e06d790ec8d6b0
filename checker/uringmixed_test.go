package checker

import (
	"testing"
)

// TestUringRegMixedFiles: a fixed buffer spanning anonymous-shared memory
// moved into a memfd-private region and the memfd's own pages (two files)
// is refused with EINVAL by 6.1 (the multi-source check of 6.3, in the
// 6.1 stable tree; found by a pinned campaign on the Async-fork kernel as
// errno:uringreg:memfd-private) and accepted since 6.5. EINVAL is
// accepted only before 6.5, EFAULT never.
func TestUringRegMixedFiles(t *testing.T) {
	p := mustParse(t, `forkfuzz v1
region r0 memfd-private pages=4
region r1 anon-shared pages=2
mremap r1 off=0x0 len=0x2000 newlen=0x2000 flags=maymove|fixed to=r0 tooff=0x2000
uringreg r0 off=0x0 len=0x4000
`)
	for _, c := range []struct {
		kernel string
		errno  int
		ok     bool
	}{
		{"6.1.192-g4e939dd86bb5", 0, true},
		{"6.1.192-g4e939dd86bb5", eINVAL, true},
		{"6.1.192-g4e939dd86bb5", eFAULT, false},
		{"6.18.0", 0, true},
		{"6.18.0", eINVAL, false},
	} {
		o := Expected(p)
		if o.Ops[0].Errno != 0 || o.Ops[1].Errno != 0 {
			t.Fatalf("the model expects the mremap to fail: %+v", o.Ops[0])
		}
		o.Kernel = c.kernel
		o.Ops[1].Errno = c.errno
		if v := Check(p, o); v.OK() != c.ok {
			t.Errorf("uringreg errno %d on %s: ok %v, want %v\n%s", c.errno, c.kernel, v.OK(), c.ok, v.Report())
		}
	}
	// One file: no EINVAL on any kernel.
	one := mustParse(t, "forkfuzz v1\nregion r0 memfd-private pages=4\nuringreg r0 off=0x0 len=0x4000\n")
	o := Expected(one)
	o.Kernel, o.Ops[0].Errno = "6.1.192", eINVAL
	if v := Check(one, o); v.OK() {
		t.Errorf("EINVAL for a buffer of one memfd passes on 6.1")
	}
}
