package executor

import (
	"encoding/json"
	"os"
	"syscall"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestMain re-executes the test binary with the GODEBUG setting the
// executor needs (a running process cannot change it).
func TestMain(m *testing.M) {
	if !HasGODEBUG() {
		exe, err := os.Executable()
		if err == nil {
			err = syscall.Exec(exe, os.Args, EnvWithGODEBUG(os.Environ()))
		}
		panic("re-exec with GODEBUG failed: " + err.Error())
	}
	os.Exit(m.Run())
}

var testExec *Executor

func executor(t testing.TB) *Executor {
	t.Helper()
	if testExec == nil {
		x, err := New()
		if err != nil {
			t.Fatal(err)
		}
		testExec = x
	}
	return testExec
}

func run(t testing.TB, text string, opt Options) (*prog.Program, *obs.Observation) {
	t.Helper()
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	o, err := executor(t).Run(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	return p, o
}

func word(v *obs.View, region int, off uint64) uint64 {
	for _, w := range v.Words {
		if w.Region == region && w.Off == off {
			return w.Value
		}
	}
	return 0
}

func TestForkSnapshotAndIsolation(t *testing.T) {
	p, o := run(t, `forkfuzz v1
region r0 anon-private pages=4
region r1 anon-shared pages=1
store r0 off=0x0 count=2 stride=0x1000
fork f0
store r0 off=0x0 count=1
store r1 off=0x8 count=1
f0: store r0 off=0x1000 count=1
wait f0
`, Options{})
	if testing.Verbose() {
		b, _ := json.MarshalIndent(o, "", " ")
		t.Logf("%s", b)
	}
	for i, r := range o.Ops {
		if !r.Ran || r.Errno != 0 {
			t.Fatalf("op %d (%v): %+v", i, p.Ops[i], r)
		}
	}
	if len(o.Views) != 2 || o.Views[0].Proc != 1 || o.Views[0].At != obs.AtStart || o.Views[1].At != obs.AtEnd {
		t.Fatalf("views: %+v", o.Views)
	}
	child, parent := &o.Views[0], &o.Views[1]
	if got := word(child, 0, 0); got != prog.SlotValue(0, 0) {
		t.Errorf("child sees %#x at r0+0, want the pre-fork value %#x", got, prog.SlotValue(0, 0))
	}
	if got := word(child, 1, 8); got != prog.SlotValue(3, 0) {
		t.Errorf("child sees %#x at r1+8, want the shared write %#x", got, prog.SlotValue(3, 0))
	}
	if got := word(parent, 0, 0x1000); got != prog.SlotValue(0, 1) {
		t.Errorf("parent sees %#x at r0+0x1000: the child's private write leaked?", got)
	}
	if got := word(parent, 0, 0); got != prog.SlotValue(2, 0) {
		t.Errorf("parent sees %#x at r0+0", got)
	}
	if o.Ops[5].Ret != 0 {
		t.Errorf("child exit status %#x", o.Ops[5].Ret)
	}
	if st := parent.StateAt(0, 3); st != obs.Readable {
		t.Errorf("r0 page 3 state %v", st)
	}
	if st := parent.StateAt(0, 4); st != 0 {
		t.Errorf("r0 page 4 state %v, want unmapped", st)
	}
}
