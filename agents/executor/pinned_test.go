package executor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestWritesIntoBlockedChild: /proc/PID/mem and process_vm_writev writes
// into a child that has not run yet show in its start view and never in
// its parent.
func TestWritesIntoBlockedChild(t *testing.T) {
	_, o := run(t, `forkfuzz v1
region r0 anon-private pages=2
mprotect r0 off=0x1000 len=0x1000 prot=r
fork f0
procmem r0 off=0x1008 count=1 into=f0
pvwrite r0 off=0x10 count=2 stride=0x1000 into=f0
wait f0
`, Options{})
	if r := o.Ops[2]; r.Errno != 0 || r.Ret != 1 || r.Skipped != 0 {
		t.Fatalf("procmem through a read-only private mapping: %+v", r)
	}
	if r := o.Ops[3]; r.Errno != 0 || r.Ret != 1 || r.Skipped != 1 {
		t.Fatalf("pvwrite: want 1 written, 1 refused (read-only page): %+v", r)
	}
	child := findView(t, o, 1, obs.AtStart)
	parent := findView(t, o, 0, obs.AtEnd)
	for _, c := range []struct {
		off uint64
		val uint64
	}{{0x1008, prog.SlotValue(2, 0)}, {0x10, prog.SlotValue(3, 0)}} {
		if got := word(child, 0, c.off); got != c.val {
			t.Errorf("child's word at %#x = %#x, want %#x", c.off, got, c.val)
		}
		if got := word(parent, 0, c.off); got != 0 {
			t.Errorf("parent's word at %#x = %#x: a write into the child leaked", c.off, got)
		}
	}
}

// TestPinnedSkipReason: without a usable scratch directory, odirect and
// uringread are skipped and say why, instead of failing or pretending.
func TestPinnedSkipReason(t *testing.T) {
	t.Setenv("FORKFUZZ_SCRATCH", "/nonexistent/forkfuzz-scratch")
	x, err := New() // a fresh executor: the scratch file is opened once per executor
	if err != nil {
		t.Fatal(err)
	}
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=4
odirect r0 off=0x0 len=0x1000
uringreg r0 off=0x0 len=0x4000
uringread r0 off=0x1000 len=0x1000
`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := x.Run(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := o.Ops[0].Skip; !strings.Contains(s, "O_DIRECT unavailable") || !strings.Contains(s, "no such file") {
		t.Errorf("odirect skip reason %q", s)
	}
	if r := o.Ops[1]; r.Skip == "" && r.Errno != 0 {
		t.Errorf("uringreg failed without a skip reason: %+v", r)
	}
	if r := o.Ops[2]; r.Skip == "" {
		t.Errorf("uringread without a scratch file was not skipped: %+v", r)
	} else {
		t.Logf("uringread: %s", r.Skip)
	}
}

func findView(t *testing.T, o *obs.Observation, proc, at int) *obs.View {
	t.Helper()
	for i := range o.Views {
		if o.Views[i].Proc == proc && o.Views[i].At == at {
			return &o.Views[i]
		}
	}
	t.Fatalf("no view of proc %d at %d", proc, at)
	return nil
}

// TestMemPath: memPath writes the /proc path of a pid, NUL-terminated,
// without allocating (it runs in forked children).
func TestMemPath(t *testing.T) {
	m := &machine{}
	for _, pid := range []uintptr{0, 1, 9, 10, 4242, 1<<22 - 1, ^uintptr(0)} {
		want := fmt.Sprintf("/proc/%d/mem\x00", pid)
		if pid == 0 {
			want = "/proc/self/mem\x00"
		}
		m.memPath(pid)
		if got := string(m.pin.path[:len(want)]); got != want {
			t.Errorf("memPath(%d) = %q, want %q", pid, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.memPath(123456) }); n != 0 {
		t.Errorf("memPath allocates %v times per call", n)
	}
}
