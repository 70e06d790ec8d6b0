package executor

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestMain re-executes the test binary with the GODEBUG setting the
// executor needs (a running process cannot change it).
func TestMain(m *testing.M) {
	if os.Getenv("FORKFUZZ_TEST_SERVE_EXECUTOR") == "1" {
		Serve()
	}
	if err := ReexecWithGODEBUG(); err != nil {
		panic(err)
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

func TestNestedKillMemfdAdvice(t *testing.T) {
	p, o := run(t, `forkfuzz v1
region r0 anon-private pages=2
region r1 memfd-private pages=2
region r2 anon-private pages=1
region r3 anon-private pages=1
store r0 off=0x0 count=1
madvise r2 off=0x0 len=0x1000 advice=dontfork
store r3 off=0x0 count=1
madvise r3 off=0x0 len=0x1000 advice=wipeonfork
fork f0
pwrite r1 off=0x10 count=1
kill f0
wait f0
fork f1
f1: fork f2
f2: check
f1: store r0 off=0x8 count=1
f1: wait f2
wait f1
mremap r0 off=0x0 len=0x2000 newlen=0x4000 flags=none
`, Options{})
	for i, r := range o.Ops {
		if !r.Ran && p.Ops[i].Proc != 1 {
			t.Errorf("op %d (%v) did not run", i, p.Ops[i])
		}
	}
	if st := o.Ops[7].Ret; st&0x7f != 9 {
		t.Errorf("killed child status %#x, want SIGKILL", st)
	}
	var f2check, f1start *obs.View
	for i := range o.Views {
		v := &o.Views[i]
		switch {
		case v.Proc == 3 && v.At == 10:
			f2check = v
		case v.Proc == 2 && v.At == obs.AtStart:
			f1start = v
		case v.Proc == 1:
			t.Errorf("killed child took a view")
		}
	}
	if f2check == nil || f1start == nil {
		t.Fatalf("missing views: %+v", o.Views)
	}
	if got := word(f1start, 1, 0x10); got != prog.SlotValue(5, 0) {
		t.Errorf("memfd-private page does not show the pwrite: %#x", got)
	}
	if st := f1start.StateAt(2, 0); st != 0 {
		t.Errorf("dontfork region is %v in the child", st)
	}
	if st, w := f1start.StateAt(3, 0), word(f1start, 3, 0); st != obs.Readable || w != 0 {
		t.Errorf("wipeonfork region: state %v word %#x", st, w)
	}
	if got := word(f2check, 0, 0); got != prog.SlotValue(0, 0) {
		t.Errorf("grandchild does not see the pre-fork store: %#x", got)
	}
	end := &o.Views[len(o.Views)-1]
	if got := word(end, 0, 8); got != 0 {
		t.Errorf("child's write leaked into the parent: %#x", got)
	}
	if o.Ops[len(o.Ops)-1].Errno != 0 || end.StateAt(0, 3) != obs.Readable {
		t.Errorf("mremap grow: %+v, page 3 %v", o.Ops[len(o.Ops)-1], end.StateAt(0, 3))
	}
}

// TestForkUnderGC forks many times while other goroutines allocate, so the
// collector is often mid-cycle at fork: children must never hang or crash.
func TestForkUnderGC(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 50
	}
	stop := make(chan struct{})
	defer close(stop)
	for g := 0; g < 2; g++ {
		go func() {
			var keep [][]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				keep = append(keep, make([]byte, 64<<10))
				if len(keep) > 256 {
					keep = nil
				}
			}
		}()
	}
	text := `forkfuzz v1
region r0 anon-private pages=8 thp=off
store r0 off=0x0 count=8 stride=0x1000
fork f0
store r0 off=0x0 count=8 stride=0x1000
f0: fork f1
f1: check
f0: wait f1
wait f0
`
	for i := 0; i < n; i++ {
		_, o := run(t, text, Options{})
		if o.Ops[len(o.Ops)-1].Ret != 0 || len(o.Views) != 4 {
			t.Fatalf("iteration %d: child status %#x, %d views", i, o.Ops[len(o.Ops)-1].Ret, len(o.Views))
		}
	}
}

func TestCorruptions(t *testing.T) {
	text := `forkfuzz v1
region r0 anon-private pages=1
store r0 off=0x0 count=2
fork f0
store r0 off=0x10 count=1
wait f0
`
	_, clean := run(t, text, Options{})
	for _, name := range CorruptionNames() {
		_, o := run(t, text, Options{Corrupt: name})
		if o.Corruption != name {
			t.Fatalf("%s: not marked", name)
		}
		a, b := clean.Views[0], o.Views[0]
		if len(a.Words) == len(b.Words) && a.Pages[0].Digest == b.Pages[0].Digest {
			t.Errorf("%s changed nothing: %+v", name, b)
		}
	}
	p, _ := prog.Parse([]byte(text))
	if _, err := executor(t).Run(p, Options{Corrupt: "bogus"}); err == nil {
		t.Error("unknown corruption accepted")
	}
}

// TestHotSpot: a full buffer's note names the functions holding its PCs,
// by share.
func TestHotSpot(t *testing.T) {
	syms := textSymbols()
	if syms == "" {
		t.Skip("/proc/kallsyms is unreadable or hides addresses here")
	}
	// Two functions with addresses of their own (no alias, no neighbour
	// at the same address).
	count := map[uint64]int{}
	type sym struct {
		addr uint64
		name string
	}
	var all []sym
	for _, l := range strings.Split(syms, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			t.Fatalf("kallsyms line %q", l)
		}
		count[a]++
		all = append(all, sym{a, f[2]})
	}
	var pick []sym
	for _, s := range all {
		if count[s.addr] == 1 && len(pick) < 2 && (len(pick) == 0 || pick[0].addr != s.addr) {
			pick = append(pick, s)
		}
	}
	if len(pick) < 2 {
		t.Skip("no two symbols with addresses of their own")
	}
	got := hotSpot([]uint64{pick[0].addr, pick[0].addr, pick[0].addr + 1, pick[1].addr})
	want := fmt.Sprintf("mostly in %s 75%%, %s 25%%", pick[0].name, pick[1].name)
	if got != want {
		t.Fatalf("hotSpot = %q, want %q", got, want)
	}
	if got := hotSpot(nil); got != "" {
		t.Errorf("hotSpot(nil) = %q", got)
	}
}

// TestKcovResultNotes: the notes of full buffers in the main thread, a
// grown child and a thread (the first two-size grow read a child's
// overWord for the main slot, whose is nil, and panicked whenever the
// main buffer filled).
func TestKcovResultNotes(t *testing.T) {
	k := &kcovState{ok: true, on: true, overAt: 3, hot: [kcovSlots]string{0: "mostly in copy_page_range 27%"}}
	set := func(i int, w uint64) {
		k.pcs[i] = make([]uint64, 9)
		k.edges[i] = make([]uint64, 9)
		k.pcs[i][0], k.pcs[i][1] = w, uint64(0x1000+i)
	}
	set(0, 1<<63|1<<62|1)
	set(1, 1<<63|1<<62|1)
	k.overWord[1] = []uint64{5 + 2, uint64(4+2) | uint64(kcovForkWords)<<32}
	th := threadSlot(2)
	set(th, 1<<63|1)
	k.overWord[th] = []uint64{9 + 2, 0}
	k.live[th] = true
	c := k.result(1)
	for _, want := range []string{
		"process 0: the kcov buffer filled during op 3 (mostly in copy_page_range 27%)",
		"process 1: the kcov buffer filled during op 5 (grown to 4M PCs at op 4)",
		"thread 2: a set filled during op 9",
	} {
		if !strings.Contains(c.Note, want) {
			t.Errorf("note %q lacks %q", c.Note, want)
		}
	}
	if c.Procs != 2 || c.Threads != 1 || !c.Overflow || len(c.PCs) != 3 {
		t.Errorf("coverage %+v", c)
	}
}

// A fork's hold keeps the child off the CPU while the parent runs its
// next operations (the child shares the parent's one CPU and the parent
// runs SCHED_FIFO): when the hold ends the child has not been on a CPU
// yet (its schedstat), every time; a wait ends a hold early.
func TestForkHold(t *testing.T) {
	const text = `forkfuzz v1
region r0 anon-private pages=512
store r0 off=0x0 count=512 stride=0x1000
fork f0 hold=%d
store r0 off=0x0 count=8192 stride=0x40
store r0 off=0x8 count=512 stride=0x1000
wait f0
`
	for k := 0; k < 3; k++ {
		p, o := run(t, fmt.Sprintf(text, 1), Options{})
		if p.Ops[1].Hold != 1 {
			t.Fatalf("hold not parsed: %+v", p.Ops[1])
		}
		if len(o.Holds) != 1 || o.Holds[0].Op != 1 || o.Holds[0].Ops != 1 {
			t.Fatalf("run %d: holds %+v, want one of 1 operation at op 1", k, o.Holds)
		}
		if ran := o.Holds[0].Ran; ran != "" && fairServer() {
			t.Logf("run %d: %s (this kernel has the fair server, below)", k, ran)
		} else if ran != "" {
			t.Errorf("run %d: the hold did not hold: %s", k, ran)
		}
	}
	_, o := run(t, fmt.Sprintf(text, 5), Options{})
	if len(o.Holds) != 1 || o.Holds[0].Ops != 2 {
		t.Errorf("hold=5 ended by the wait after 2 operations: holds %+v", o.Holds)
	} else if ran := o.Holds[0].Ran; ran != "" {
		// Linux 6.12's fair server (a deadline server that gives
		// starved CFS tasks 50 ms a second beside real-time ones) may
		// run the held child during the longer hold: the executor must
		// then say so, which it did. The guest kernels are 6.1.
		if fairServer() {
			t.Logf("hold=5: %s (this kernel, %s, has the fair server: the hold cannot be guaranteed here, and the run says so)", ran, kernelRelease())
		} else {
			t.Errorf("hold=5: the hold did not hold: %s", ran)
		}
	}
	if _, o := run(t, strings.Replace(fmt.Sprintf(text, 1), " hold=1", "", 1), Options{}); len(o.Holds) != 0 {
		t.Errorf("a fork without hold: holds %+v", o.Holds)
	}
}

// fairServer reports whether this kernel has the fair server (Linux
// 6.12+, /sys/kernel/debug/sched/fair_server, or the release where
// debugfs is not mounted).
func fairServer() bool {
	if _, err := os.Stat("/sys/kernel/debug/sched/fair_server"); err == nil {
		return true
	}
	var a, b int
	if n, _ := fmt.Sscanf(kernelRelease(), "%d.%d", &a, &b); n != 2 {
		return false
	}
	return a > 6 || a == 6 && b >= 12
}
