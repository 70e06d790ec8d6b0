package sweep

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
	"github.com/forkfuzz/forkfuzz/kernel"
)

func TestMain(m *testing.M) {
	if os.Getenv("FORKFUZZ_TEST_SERVE_EXECUTOR") == "1" {
		executor.Serve()
	}
	os.Exit(m.Run())
}

func repoRoot(t *testing.T) string { return testutil.RepoRoot(t) }

func vmasProg(t *testing.T) *prog.Program {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "corpus/rollback/vmas.ffz"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := prog.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSweepUnsupported: on a kernel without fail-nth (the host, usually)
// the sweep says so and never returns a clean result.
func TestSweepUnsupported(t *testing.T) {
	if _, err := os.Stat("/proc/thread-self/fail-nth"); err == nil {
		t.Skip("the host kernel has fail-nth; TestQEMUSweep covers the sweep")
	}
	tg := agents.NewNative(func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = []string{"FORKFUZZ_TEST_SERVE_EXECUTOR=1"}
		return cmd
	})
	defer tg.Close()
	res, err := Run(tg, vmasProg(t), Options{MaxK: 3})
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "fail-nth") {
		t.Fatalf("got %+v, %v; want an UnsupportedError naming fail-nth", res, err)
	}
	if len(res.Forks) != 0 {
		t.Fatalf("a sweep that could not inject reported forks: %+v", res.Forks)
	}
}

// fakeTarget answers like a kernel whose fork has 7 failure points, where
// the 2nd is tolerated; bad makes the parent's maps change after a failure.
type fakeTarget struct {
	points int
	bad    bool
	runs   []int
	// early, when set, are the point counts of the first runs (a fresh
	// executor's warm-up); late, from run lateFrom on, replaces points.
	early          []int
	late, lateFrom int
	// programEnd, when set, is the last failure point in the program's
	// part (obs.Rollback.Part; the executor's sentinel); flip, when set,
	// is one K past it that still says "program" (out of order);
	// unmeasured says why no part was measured.
	programEnd, flip int
	unmeasured       string
	allRuntime       bool
}

func (f *fakeTarget) Name() string { return "fake" }
func (f *fakeTarget) Close() error { return nil }
func (f *fakeTarget) Run(p *prog.Program, _ agents.Options) (*obs.Observation, error) {
	o := checker.Expected(p)
	i := p.Injected()[0]
	k := p.Ops[i].FailNth
	points := f.points
	switch n := len(f.runs); {
	case n < len(f.early):
		points = f.early[n]
	case f.lateFrom > 0 && n >= f.lateFrom:
		points = f.late
	}
	f.runs = append(f.runs, k)
	rb := obs.Rollback{Fork: p.Ops[i].Fork, Op: i, At: i, Cause: obs.CauseFailNth, FailNth: k, Injection: obs.InjInjected,
		ChildrenBefore: []int{}, ChildrenAfter: []int{}, Comparable: true, MapsBefore: "m", MapsAfter: "m",
		PageTablesBefore: -1, PageTablesAfter: -1, VmPTEBefore: -1, VmPTEAfter: -1, PMDSource: "absent: fake"}
	switch {
	case k > points:
		rb.Injection, rb.Remaining = obs.InjNotReached, k-points
	case k == 2:
	default:
		rb.Errno = 12
		o.Ops[i].Errno, o.Ops[i].Ret = 12, 0
		for j, op := range p.Ops {
			if op.Kind == prog.OpWait && op.Fork == p.Ops[i].Fork {
				o.Ops[j].Errno, o.Ops[j].Ret = 10, 0
			}
		}
		var views []obs.View
		for _, v := range o.Views {
			if v.Proc != p.Ops[i].Fork+1 {
				views = append(views, v)
			}
		}
		o.Views = views
		if f.bad && k == 5 {
			rb.MapsAfter = "changed"
		}
		switch {
		case f.unmeasured != "":
			rb.PartUnknown = f.unmeasured
		case f.programEnd > 0 && (k <= f.programEnd || k == f.flip):
			rb.Part = obs.PartProgram
		case f.programEnd > 0 || f.allRuntime:
			rb.Part = obs.PartRuntime
		}
	}
	if rb.Errno == 0 {
		for j, op := range p.Ops {
			if op.Kind == prog.OpWait && op.Fork == p.Ops[i].Fork {
				rb.At = j
			}
		}
	}
	o.Rollbacks = []obs.Rollback{rb}
	return o, nil
}

func TestSweepCounts(t *testing.T) {
	p := vmasProg(t)
	f := &fakeTarget{points: 7}
	res, err := Run(f, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr := res.Forks[0]
	if fr.Points != 7 || fr.Runs != 8 || fr.Failed != 6 || fr.Tolerated != 1 || len(fr.Findings) != 0 || fr.Errnos[12] != 6 {
		t.Fatalf("sweep: %+v", fr)
	}
	// With a stride the count of failure points is still exact.
	f = &fakeTarget{points: 7}
	res, err = Run(f, p, Options{Stride: 3})
	if err != nil {
		t.Fatal(err)
	}
	if fr := res.Forks[0]; fr.Points != 7 || fr.Runs != 4 {
		t.Fatalf("stride 3: %+v (runs %v)", fr, f.runs)
	}
	// A broken rollback is found, at the failure point that shows it,
	// with a program that replays it.
	f = &fakeTarget{points: 7, bad: true}
	res, err = Run(f, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr = res.Forks[0]
	if len(fr.Findings) != 1 || fr.Findings[0].K != 5 || fr.Findings[0].Issue.Signature != "rollback:maps-changed" ||
		!strings.Contains(string(fr.Findings[0].Program.Format()), "fork f0 fail_nth=5") {
		t.Fatalf("findings %+v", fr.Findings)
	}
}

// TestSweepProgramPart: the failure points in the program's part (the
// executor's sentinel says where each failed fork stopped) are counted,
// and --program-part ends the sweep at the first one past it.
func TestSweepProgramPart(t *testing.T) {
	p := vmasProg(t)
	for _, tc := range []struct {
		name           string
		f              *fakeTarget
		opt            Options
		min, max, runs int
		note           string
		points         int
	}{
		{"whole sweep", &fakeTarget{points: 7, programEnd: 4}, Options{}, 4, 4, 8, "", 7},
		{"program part only", &fakeTarget{points: 7, programEnd: 4}, Options{ProgramPart: true}, 4, 4, 5, "", -1},
		{"stride", &fakeTarget{points: 7, programEnd: 4}, Options{Stride: 3}, 4, 6, 4, "", 7},
		{"out of order", &fakeTarget{points: 7, programEnd: 3, flip: 6}, Options{}, 3, 3, 8, "out of order", 7},
		{"unmeasured", &fakeTarget{points: 7, unmeasured: "arena top"}, Options{}, -1, -1, 8, "not measured: arena top", 7},
		{"past from the start", &fakeTarget{points: 7, allRuntime: true}, Options{}, -1, -1, 8, "already stopped past", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(tc.f, p, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			fr := res.Forks[0]
			if fr.ProgramPoints != tc.min || fr.ProgramPointsMax != tc.max || fr.Runs != tc.runs || fr.Points != tc.points {
				t.Errorf("program points %d..%d, runs %d, points %d; want %d..%d, %d runs, %d points (parts %v, note %q, stopped %q)",
					fr.ProgramPoints, fr.ProgramPointsMax, fr.Runs, fr.Points, tc.min, tc.max, tc.runs, tc.points, fr.Parts, fr.PartNote, fr.Stopped)
			}
			if !strings.Contains(fr.PartNote, tc.note) || (tc.note == "") != (fr.PartNote == "") {
				t.Errorf("note %q, want one containing %q", fr.PartNote, tc.note)
			}
			if tc.opt.ProgramPart && !strings.Contains(fr.Stopped, "--program-part") {
				t.Errorf("stopped %q, want the reason to name --program-part", fr.Stopped)
			}
		})
	}
}

// TestSweepSettles: probes run until three in a row count the same
// failure points, and a count that moves during the sweep is reported.
func TestSweepSettles(t *testing.T) {
	p := vmasProg(t)
	for _, tc := range []struct {
		name    string
		f       *fakeTarget
		settle  int
		probes  []int
		settled bool
		points  int
		moved   bool
	}{
		{"warm-up then steady", &fakeTarget{points: 7, early: []int{10, 9}}, 12, []int{10, 9, 7, 7, 7}, true, 7, false},
		{"steady from the start", &fakeTarget{points: 7}, 12, []int{7, 7, 7}, true, 7, false},
		{"never steady", &fakeTarget{points: 7, early: []int{9, 8, 9, 8}}, 4, []int{9, 8, 9, 8}, false, 7, true},
		{"moves during the sweep", &fakeTarget{points: 7, late: 8, lateFrom: 6}, 12, []int{7, 7, 7}, true, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(tc.f, p, Options{Settle: tc.settle})
			if err != nil {
				t.Fatal(err)
			}
			fr := res.Forks[0]
			if fmt.Sprint(fr.Probes) != fmt.Sprint(tc.probes) || fr.Settled != tc.settled || fr.Points != tc.points || (fr.Moved != "") != tc.moved {
				t.Errorf("probes %v settled %v points %d moved %q; want %v %v %d moved=%v", fr.Probes, fr.Settled, fr.Points, fr.Moved, tc.probes, tc.settled, tc.points, tc.moved)
			}
			if fr.Runs != len(tc.f.runs)-len(fr.Probes) {
				t.Errorf("%d sweep runs counted, %d runs at the target, %d probes", fr.Runs, len(tc.f.runs), len(fr.Probes))
			}
		})
	}
}

// --- QEMU: the reference kernel with fault injection ---

const bigParent = `forkfuzz v1
region r0 anon-private pages=16384 thp=off
region r1 anon-private pages=16384 thp=off
region r2 anon-private pages=16384 thp=off
store r0 off=0x0 count=16384 stride=0x1000
store r1 off=0x0 count=16384 stride=0x1000
store r2 off=0x0 count=16384 stride=0x1000
fork f0
wait f0
`

var agentOnce sync.Once
var agentPath string
var agentErr error

func staticAgent(t *testing.T) string {
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "forkfuzz-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(dir, "forkfuzz")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", agentPath, "github.com/forkfuzz/forkfuzz/agents/vm/internal/agentbin")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = errors.New("build the static agent: " + err.Error() + ": " + string(out))
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestQEMUSweep boots the reference kernel (fault injection built in),
// with the forkfuzz_pmd module when FORKFUZZ_KERNEL_TREE names a prepared
// tree of that kernel, counts the failure points of a fork of a parent
// with anonymous, THP, shared and memfd VMAs, sweeps a spread of them and
// expects no finding; then checks a killed child.
func TestQEMUSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a QEMU VM: skipped under -short")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-system-x86_64 is missing under CI")
		}
		t.Skip("qemu-system-x86_64 not installed: cannot boot the kernel with fault injection")
	}
	image := os.Getenv("FORKFUZZ_TEST_KERNEL")
	if image == "" {
		m, _ := filepath.Glob(filepath.Join(repoRoot(t), "../shared/kernels/bzImage-*-forkfuzz"))
		if len(m) == 0 {
			t.Skip("no reference kernel: set FORKFUZZ_TEST_KERNEL or provide ../shared/kernels/bzImage-*-forkfuzz (the reference kernel)")
		}
		image = m[0]
	}
	if cfg, src, err := kernel.FindConfig(image); err == nil && !cfg.On("CONFIG_FAULT_INJECTION") {
		t.Skipf("%s has no CONFIG_FAULT_INJECTION (per %s): nothing to sweep", image, src)
	}
	var mods []string
	if tree := os.Getenv("FORKFUZZ_KERNEL_TREE"); tree != "" {
		ko := filepath.Join(t.TempDir(), kernel.PMDModuleName)
		if err := kernel.BuildPMDModule(tree, ko, nil); err != nil {
			t.Fatal(err)
		}
		mods = append(mods, ko)
	} else {
		t.Log("FORKFUZZ_KERNEL_TREE not set: no forkfuzz_pmd module, the PMD check is not exercised (behavioural checks only)")
	}
	tg, err := vm.New(vm.Config{Kernel: image, Modules: mods, Agent: staticAgent(t), Accel: "auto", Workdir: t.TempDir(),
		BootTimeout: 120 * time.Second, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	p := vmasProg(t)
	fork := p.Injected()
	if len(fork) != 0 {
		t.Fatal("vmas.ffz should not carry fail_nth")
	}
	fi := p.ForkOp(0)

	// Count the failure points in one run: fail_nth far beyond them.
	q := p.Clone()
	q.Ops[fi].FailNth = prog.MaxFailNth
	o, err := tg.Run(q, agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := checker.Check(q, o); len(v.Findings) != 0 {
		t.Fatalf("probe run: %v", v.Findings)
	}
	rb := o.Rollbacks[0]
	if rb.Injection != obs.InjNotReached || rb.Errno != 0 {
		t.Fatalf("probe: %+v", rb)
	}
	points := prog.MaxFailNth - rb.Remaining
	t.Logf("fork f0 passes %d failure points; pmd: %s; write pass after the fork: %d faults for %d pages", points, rb.PMDSource, rb.Faults, rb.WritePages)
	if rb.PageTablesBefore < 0 || rb.PageTablesAfter < 0 {
		t.Fatalf("PageTables not measured in the VM: %s", rb.PageTablesNote)
	}
	if len(mods) > 0 && (strings.HasPrefix(rb.PMDSource, "absent") || len(rb.PMDAfter) == 0) {
		t.Fatalf("the module was loaded but gave no PMDs: %s", rb.PMDSource)
	}

	// Sweep a spread of them (every one would take ~2 minutes under TCG;
	// forkfuzz sweep does that).
	stride := max(1, points/12)
	start := time.Now()
	res, err := Run(tg, p, Options{Stride: stride, Log: testLog{t}, Settle: 8})
	if err != nil {
		t.Fatal(err)
	}
	fr := res.Forks[0]
	t.Logf("sweep with stride %d: %d runs in %v: %d failed forks, %d tolerated faults, %d failure points; probes %v (settled %v) %s", stride, fr.Runs, time.Since(start).Round(time.Millisecond), fr.Failed, fr.Tolerated, fr.Points, fr.Probes, fr.Settled, fr.Moved)
	if len(fr.Probes) < 3 {
		t.Errorf("%d probes counted failure points, want at least 3: %v", len(fr.Probes), fr.Probes)
	}
	for _, f := range fr.Findings {
		t.Errorf("fail_nth=%d: %s: %s\n%s", f.K, f.Issue.Signature, f.Issue.Explanation, f.Program.Format())
	}
	// The count depends on the executor's own mappings (the Go runtime's
	// heap and threads are VMAs fork copies too), which change a little
	// from run to run.
	if fr.Points < points*4/5 || fr.Points > points*6/5 || fr.Failed == 0 {
		t.Fatalf("sweep: %+v (probe: %d failure points)", fr, points)
	}

	// The kernel says where it injected: fail_nth=1 hits the first
	// allocation of copy_process.
	q = p.Clone()
	q.Ops[fi].FailNth = 1
	if o, err = tg.Run(q, agents.Options{}); err != nil {
		t.Fatal(err)
	}
	if rb := o.Rollbacks[0]; rb.Injection != obs.InjInjected || !strings.Contains(rb.Site, "copy_process") {
		t.Fatalf("fail_nth=1: injection %q, site %q", rb.Injection, rb.Site)
	}
	t.Logf("fail_nth=1 struck at %s", o.Rollbacks[0].Site)
	if part := o.Rollbacks[0].Part; part != "" || o.Rollbacks[0].PartUnknown == "" {
		t.Errorf("arena top: part %q measured (%q); want it unmeasured, with the reason", part, o.Rollbacks[0].PartUnknown)
	}

	// The same program below the Go heap: the sentinel says where each
	// failed fork stopped, and the sweep ends at the first point past
	// the program's regions (measured: points 1..56 of 342, twice).
	low := p.Clone()
	low.Arena = prog.ArenaLow
	start = time.Now()
	res, err = Run(tg, low, Options{Stride: 4, Log: testLog{t}, ProgramPart: true})
	if err != nil {
		t.Fatal(err)
	}
	fr = res.Forks[0]
	t.Logf("arena low, --program-part, stride 4: %d runs in %v: program's part %d..%d, parts %v; %s", fr.Runs, time.Since(start).Round(time.Millisecond), fr.ProgramPoints, fr.ProgramPointsMax, fr.Parts, fr.Stopped)
	if fr.PartNote != "" || fr.ProgramPoints < 20 || fr.ProgramPointsMax >= points/2 || fr.Parts[obs.PartRuntime] != 1 || fr.Parts[obs.PartProgram] < 5 || len(fr.Findings) != 0 {
		t.Errorf("arena low sweep: program's part %d..%d (%q), parts %v, %d findings; want the program's points first, then one past them, of %d",
			fr.ProgramPoints, fr.ProgramPointsMax, fr.PartNote, fr.Parts, len(fr.Findings), points)
	}

	// A memory cgroup limit far too small for the fork of a parent with
	// 192 MiB of written memory (its page tables alone need 384 KiB),
	// then a generous one. (A small parent's fork fits in the memory the
	// cgroup has charged in advance, per CPU, and does not fail.)
	big, err := prog.Parse([]byte(bigParent))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit uint64
		errno int
	}{{4096, 12}, {1 << 30, 0}} {
		q = big.Clone()
		q.Ops[big.ForkOp(0)].OOMMemcg = c.limit
		if o, err = tg.Run(q, agents.Options{}); err != nil {
			var ce *executor.CrashError
			if errors.As(err, &ce) {
				t.Fatalf("oom_memcg=%d: %s", c.limit, ce.Explanation())
			}
			t.Fatalf("oom_memcg=%d: %v", c.limit, err)
		}
		rb := o.Rollbacks[0]
		t.Logf("oom_memcg=%d: errno %d, %s, %v; write pass %d faults for %d pages", c.limit, rb.Errno, rb.Memcg, rb.Setup, rb.Faults, rb.WritePages)
		if v := checker.Check(q, o); len(v.Findings) != 0 || rb.Errno != c.errno || rb.MemcgHit != (c.errno != 0) {
			t.Fatalf("oom_memcg=%d: %v %+v", c.limit, v.Findings, rb)
		}
	}

	// A child killed right after fork, before it ran.
	kp, err := prog.Parse([]byte(strings.Replace(string(p.Format()), "f0: store r1 off=0x28 count=4 stride=0x1000\n", "kill f0\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	o, err = tg.Run(kp, agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := checker.Check(kp, o); len(v.Findings) != 0 || len(o.Rollbacks) != 1 || o.Rollbacks[0].Cause != obs.CauseKill || !o.Rollbacks[0].Comparable {
		t.Fatalf("killed child: %v %+v", v.Findings, o.Rollbacks)
	}
}
