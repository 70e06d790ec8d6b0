package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func testRemote(t *testing.T) *Remote {
	r := &Remote{
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = []string{"FORKFUZZ_TEST_SERVE_EXECUTOR=1"}
			return cmd
		},
		Timeout: 20 * time.Second,
		Stderr:  os.Stderr,
	}
	t.Cleanup(r.Close)
	return r
}

const smallProg = `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x0 count=2
fork f0
store r0 off=0x0 count=1
wait f0
`

func TestRemoteRunAndCrashRecovery(t *testing.T) {
	r := testRemote(t)
	p, err := prog.Parse([]byte(smallProg))
	if err != nil {
		t.Fatal(err)
	}
	o, err := r.Run(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Views) != 2 || o.Ops[3].Ret != 0 {
		t.Fatalf("unexpected observation: %+v", o)
	}
	// The executor is killed (as by the OOM killer) while running a program:
	// the caller gets a CrashError and carries on.
	_, err = r.run(RunArgs{Program: p.Format(), SelfKill: true}, len(p.Ops))
	var ce *CrashError
	if !errors.As(err, &ce) || ce.Hang || ce.Lost || !strings.Contains(ce.Status, "killed") {
		t.Fatalf("want a CrashError saying killed, got %v", err)
	}
	// What the executor said on its standard error during the run is in
	// the crash and its finding files.
	if !strings.Contains(ce.Stderr, "killing itself") || !strings.Contains(ce.Files()["executor-stderr.txt"], "killing itself") ||
		!strings.Contains(ce.Explanation(), "killing itself") {
		t.Fatalf("executor stderr not in the crash: %q / %q", ce.Stderr, ce.Explanation())
	}
	o, err = r.Run(p, Options{})
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if r.Restarts != 1 || len(o.Views) != 2 {
		t.Fatalf("restarts %d, views %d", r.Restarts, len(o.Views))
	}
	// A bad program is a harness error, not a crash.
	_, err = r.run(RunArgs{Program: []byte("forkfuzz v1\nfrob\n")}, 0)
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("bad program: got %v", err)
	}
}

// An executor whose page tables reached the run's RecyclePTEKB is
// replaced before that run, and the run's phases count its start; one
// below it is kept.
func TestRemoteRecycle(t *testing.T) {
	r := testRemote(t)
	p, err := prog.Parse([]byte(smallProg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(p, Options{}); err != nil {
		t.Fatal(err)
	}
	if r.lastPTE <= 0 {
		t.Fatalf("the executor reported page tables of %d KiB", r.lastPTE)
	}
	pid := r.cmd.Process.Pid
	if _, err := r.Run(p, Options{RecyclePTEKB: r.lastPTE + 1<<20}); err != nil {
		t.Fatal(err)
	}
	if r.Recycles != 0 || r.cmd.Process.Pid != pid {
		t.Fatalf("recycled below the bound: %d recycles, pid %d then %d", r.Recycles, pid, r.cmd.Process.Pid)
	}
	_, phases, err := r.RunRaw(p, Options{RecyclePTEKB: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Recycles != 1 || r.Restarts != 0 || r.cmd.Process.Pid == pid || phases["executor-start"] <= 0 {
		t.Fatalf("at the bound: %d recycles, %d restarts, pid %d then %d, executor-start %d us", r.Recycles, r.Restarts, pid, r.cmd.Process.Pid, phases["executor-start"])
	}
}

func TestRemoteHang(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits for a timeout")
	}
	r := testRemote(t)
	r.Timeout = time.Second
	// A child that is never released would hang wait forever if the
	// executor were broken; emulate a hang by a program whose fork tree
	// is large enough not to finish in a second on 2 cores.
	var b strings.Builder
	b.WriteString("forkfuzz v1\nregion r0 anon-private pages=16384 thp=off\nstore r0 off=0x0 count=16384 stride=0x1000\n")
	for f := 0; f < 60; f++ {
		b.WriteString("fork f" + strconv.Itoa(f) + "\ncheck\nwait f" + strconv.Itoa(f) + "\n")
	}
	p, err := prog.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(p, Options{})
	var ce *CrashError
	if !errors.As(err, &ce) || !ce.Hang {
		t.Fatalf("want a hang CrashError, got %v", err)
	}
	r.Timeout = 20 * time.Second
	q, _ := prog.Parse([]byte(smallProg))
	if _, err := r.Run(q, Options{}); err != nil {
		t.Fatalf("after hang: %v", err)
	}
}

// A hung executor's state (threads, wait channels, memory) is read before
// it is killed, so a hang says where the process was.
func TestRemoteHangState(t *testing.T) {
	r := testRemote(t)
	r.Timeout = 2 * time.Second
	p, err := prog.Parse([]byte(smallProg))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.run(RunArgs{Program: p.Format(), SelfStop: true}, len(p.Ops))
	var ce *CrashError
	if !errors.As(err, &ce) || !ce.Hang {
		t.Fatalf("want a hang CrashError, got %v", err)
	}
	for _, want := range []string{"executor pid", "State: T", "VmRSS:", "thread "} {
		if !strings.Contains(ce.State, want) {
			t.Fatalf("hang state lacks %q:\n%s", want, ce.State)
		}
	}
	if !strings.Contains(ce.Files()["executor-state.txt"], "State: T") || !strings.Contains(ce.Explanation(), "executor state before it was killed") {
		t.Fatalf("state not in the finding: %q", ce.Explanation())
	}
	r.Timeout = 20 * time.Second
	if _, err := r.Run(p, Options{}); err != nil {
		t.Fatalf("after the hang: %v", err)
	}
}

// With DumpGoroutines, a hung executor writes every goroutine's stack on
// its stderr before it is killed, and the crash carries it.
func TestRemoteHangGoroutineDump(t *testing.T) {
	r := testRemote(t)
	r.Timeout = 2 * time.Second
	r.DumpGoroutines = true
	p, err := prog.Parse([]byte(smallProg))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.run(RunArgs{Program: p.Format(), SelfStop: true}, len(p.Ops))
	var ce *CrashError
	if !errors.As(err, &ce) || !ce.Hang {
		t.Fatalf("want a hang CrashError, got %v", err)
	}
	// The dump may be longer than the tail kept: look for its frames.
	if !strings.Contains(ce.Stderr, "goroutine ") || !strings.Contains(ce.Stderr, "go-plugin") {
		t.Fatalf("no goroutine dump in the executor's stderr:\n%s", lastLines(ce.Stderr, 40))
	}
}

// TestCrashLines: a Go panic's message and its goroutine are shown, not
// the tail of the dump of every goroutine after it.
func TestCrashLines(t *testing.T) {
	var dump []string
	for i := 0; i < 100; i++ {
		dump = append(dump, fmt.Sprintf("goroutine %d line", i))
	}
	for _, tc := range []struct {
		name, in, want, not string
	}{
		{"panic after noise", "log line\npanic: runtime error: index out of range [1] with length 0\n\n" + strings.Join(dump, "\n"),
			"[1 lines before]\npanic: runtime error: index out of range [1] with length 0\n\ngoroutine 0 line", "goroutine 99 line"},
		{"fatal error", "fatal error: out of memory\n" + strings.Join(dump[:3], "\n"), "fatal error: out of memory\ngoroutine 0 line\ngoroutine 1 line\ngoroutine 2 line", "lines"},
		{"no panic: the tail", strings.Join(dump, "\n"), "goroutine 99 line", "goroutine 0 line\n"},
	} {
		got := crashLines(tc.in, 40)
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("%s: crashLines =\n%s\nwant it to contain %q and not %q", tc.name, got, tc.want, tc.not)
		}
	}
	if got := crashLines("panic: x\n"+strings.Join(dump, "\n"), 40); !strings.HasSuffix(got, "[61 lines after]") {
		t.Errorf("long panic: ends %q", got[len(got)-30:])
	}
}

// TestHangNamesBusyThreads: a hang's explanation names the threads that
// were running or in uninterruptible sleep (a fault retried for ever, a
// lock in the kernel), before the goroutine dump's idle tail.
func TestHangNamesBusyThreads(t *testing.T) {
	state := "executor pid 82\nState: S (sleeping)\nthread 104: state S, wchan futex_wait_queue\n    [<0>] futex_wait_queue+0x70/0xa0\nthread 89: state R, wchan 0\nthread 93: state D, wchan folio_wait_bit_common\n    [<0>] folio_wait_bit_common+0x1/0x2\n"
	e := &CrashError{Hang: true, Status: "no answer within 1m0s", State: state, Stderr: "goroutine 0 [idle]:"}
	want := "threads running or in uninterruptible sleep: thread 89: state R, wchan 0; thread 93: state D, wchan folio_wait_bit_common"
	if x := e.Explanation(); !strings.Contains(x, want) || strings.Index(x, want) > strings.Index(x, "executor stderr") {
		t.Errorf("explanation does not lead with the busy threads:\n%s", x)
	}
	e.State = "thread 104: state S, wchan futex_wait_queue\n"
	if x := e.Explanation(); strings.Contains(x, "threads running") {
		t.Errorf("no busy thread, yet the explanation names some:\n%s", x)
	}
}

// The observation comes back through a file (RunArgs.ObsFile) when the
// executor can write it, over the connection when it cannot. The file
// has no name left in the file system; Close closes it.
func TestRemoteObsFile(t *testing.T) {
	p, err := prog.Parse([]byte(smallProg))
	if err != nil {
		t.Fatal(err)
	}
	r := testRemote(t)
	raw, _, err := r.RunRaw(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.obsFile == nil {
		t.Fatal("no observation file")
	}
	name := r.obsFile.Name()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("the observation file is still at %s: %v", name, err)
	}
	st, err := r.obsFile.Stat()
	if err != nil || st.Size() < int64(len(raw)) {
		t.Fatalf("observation file %s: %v (%d bytes for an observation of %d)", r.obsPath, err, st.Size(), len(raw))
	}
	path := r.obsPath
	o, err := r.Run(p, Options{})
	if err != nil || len(o.Views) != 2 {
		t.Fatalf("second run through the file: %v, %d views", err, len(o.Views))
	}
	r.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after Close, %s: %v", path, err)
	}

	// A file the executor cannot open: the reply carries the observation.
	r2 := testRemote(t)
	f, err := os.CreateTemp(t.TempDir(), "obs-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r2.obsFile, r2.obsPath, r2.obsTried = f, f.Name()+".gone", true
	o, err = r2.Run(p, Options{})
	if err != nil || len(o.Views) != 2 {
		t.Fatalf("over the connection: %v, %d views", err, len(o.Views))
	}
}

// An executor whose Go runtime dies of out-of-memory while its own
// memory limit is armed is a harness failure (LimitCrashError), not a
// crash of the program's; the next run gets a fresh executor.
func TestRemoteLimitOOM(t *testing.T) {
	r := testRemote(t)
	p, err := prog.Parse([]byte(smallProg))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.run(RunArgs{Program: p.Format(), LimitOOM: true}, len(p.Ops))
	var lc *LimitCrashError
	var ce *CrashError
	if !errors.As(err, &lc) || errors.As(err, &ce) {
		t.Fatalf("want a LimitCrashError and no CrashError, got %T %v", err, err)
	}
	if !strings.Contains(lc.Fatal, "fatal error:") || !strings.Contains(lc.Fatal, "out of memory") || !strings.Contains(lc.Stderr, limitArmedMarker) {
		t.Fatalf("fatal %q, stderr %q", lc.Fatal, lc.Stderr)
	}
	t.Log(err)
	if o, err := r.Run(p, Options{}); err != nil || len(o.Views) != 2 {
		t.Fatalf("after the limit crash: %v", err)
	}
}
