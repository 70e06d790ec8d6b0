package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestFileKindsBite: on each file kind the model predicts the memfd's
// content (a child sees the file's pre-fork page in a private mapping it
// never wrote, the parent's later writes in a shared one), a child view
// that shows the parent's post-fork pwrite in a private page it had
// copied, or misses the parent's later store in a shared one, is a
// finding whose signature names the file kind; on ext4 io_uring's
// EOPNOTSUPP before 6.5 is predicted.
func TestFileKindsBite(t *testing.T) {
	for _, f := range prog.FileSystems() {
		priv, shared := prog.FileKind(f, false), prog.FileKind(f, true)
		text := "forkfuzz v1\nregion r0 " + priv.String() + " pages=2\nregion r1 " + shared.String() + " pages=2\n" +
			"pwrite r0 off=0x0 count=1 stride=0x8\nstore r0 off=0x1000 count=1 stride=0x8\nfork f0\n" +
			"pwrite r0 off=0x1000 count=1 stride=0x8\nstore r1 off=0x8 count=1 stride=0x8\nf0: check\nwait f0\n"
		p := mustParse(t, text)
		o := Expected(p)
		if v := Check(p, o); !v.OK() {
			t.Fatalf("%v: the expected run fails:\n%s", f, v.Report())
		}
		v := findView(t, o, 1, 5)
		if got, want := wordAt(v, 0, 0x0), prog.SlotValue(0, 0); got != want {
			t.Errorf("%v: child sees %#x in the file's page, want the pwrite's %#x", f, got, want)
		}
		if got, want := wordAt(v, 0, 0x1000), prog.SlotValue(1, 0); got != want {
			t.Errorf("%v: child sees %#x in the copied page, want the pre-fork store %#x", f, got, want)
		}
		if got, want := wordAt(v, 1, 0x8), prog.SlotValue(4, 0); got != want {
			t.Errorf("%v: child sees %#x in the shared page, want the parent's %#x", f, got, want)
		}
		for _, c := range []struct {
			region int
			off    uint64
			val    uint64
			kind   prog.RegionKind
		}{
			{0, 0x1000, prog.SlotValue(3, 0), priv}, // the parent's pwrite leaked into a page the parent had copied
			{1, 0x8, 0, shared},                     // the shared write lost
		} {
			o := Expected(p)
			setWord(findView(t, o, 1, 5), c.region, c.off, c.val)
			v := Check(p, o)
			if v.OK() {
				t.Errorf("%v: a child view with r%d %#x = %#x passes", f, c.region, c.off, c.val)
				continue
			}
			if sig := strings.Join(v.Signatures(), " "); !strings.Contains(sig, c.kind.String()) {
				t.Errorf("%v: signatures %q do not name %v", f, sig, c.kind)
			}
		}
	}
	p := mustParse(t, "forkfuzz v1\nregion r0 ext4-private pages=2\nuringreg r0 off=0x0 len=0x2000\n")
	o := Expected(p)
	o.Kernel = "6.1.192"
	o.Ops[0].Errno = 0
	if Check(p, o).OK() {
		t.Errorf("io_uring accepting an ext4 buffer on 6.1 passes")
	}
	o.Ops[0].Errno = eOPNOTSUPP
	if v := Check(p, o); !v.OK() {
		t.Errorf("EOPNOTSUPP on 6.1:\n%s", v.Report())
	}
}
