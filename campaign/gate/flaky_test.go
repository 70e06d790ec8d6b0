package gate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// crashingTarget is the simulated kernel whose "executor" dies on the
// runs crash picks (as the harness's executor in a VM did under load, or
// as a kernel that kills it would), with the console console.
type crashingTarget struct {
	*sim.Target
	n       atomic.Int64
	crash   func(run int64, p *prog.Program) bool
	console string
}

func (c *crashingTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if c.crash(c.n.Add(1), p) {
		return nil, &executor.CrashError{Status: "in vm: connection lost (unexpected EOF) while the executor was still running; killed it", Lost: true,
			State: "State: R (running)\n", Console: c.console}
	}
	return c.Target.Run(p, opt)
}

type gateRun struct {
	*Result
	junit string
}

func runCrashGate(t *testing.T, maxFlakes int, tg *crashingTarget) gateRun {
	t.Helper()
	return runGate(t, maxFlakes, tg)
}

func runGate(t *testing.T, maxFlakes int, tg agents.Target) gateRun {
	t.Helper()
	dir := t.TempDir()
	var log bytes.Buffer
	cfg := Config{
		Open:             func() (agents.Target, error) { return tg, nil },
		Kernel:           KernelIdentity{Target: "sim-eager"},
		Budget:           12 * time.Second,
		Seed:             7,
		Workdir:          filepath.Join(dir, "w"),
		MinPrograms:      1,
		MinimizeRuns:     20,
		MaxHarnessFlakes: maxFlakes,
		Log:              &log,
	}
	r := Run(context.Background(), cfg)
	if err := r.WriteFiles(filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.json")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateJUnit(b); err != nil {
		t.Fatalf("JUnit: %v", err)
	}
	t.Logf("exit %d: %s\n%s", r.ExitCode, r.Reason, r.Summary())
	return gateRun{r, string(b)}
}

func simTarget(t *testing.T) *sim.Target {
	s, err := sim.NewTarget(sim.Config{Mode: sim.Eager})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func findingOf(r gateRun, sig string) *FindingRecord {
	for i := range r.Findings {
		if r.Findings[i].Signature == sig {
			return &r.Findings[i]
		}
	}
	return nil
}

// One executor death that never comes back on its replays, with a clean
// console, is a harness flake: reported in the summary, JSON and JUnit,
// not counted against the kernel (exit 0) within --max-harness-flakes,
// and exit 2 beyond it. It used to fail the gate (exit 1) on the
// unmodified reference kernel.
func TestGateUnreproducedExecutorDeath(t *testing.T) {
	once := func(run int64, p *prog.Program) bool { return run == 60 }
	r := runCrashGate(t, 1, &crashingTarget{Target: simTarget(t), crash: once, console: "[ 1.0] forkfuzz (100) used greatest stack depth\n"})
	f := findingOf(r, "executor-crash")
	if f == nil || f.Status != StatusHarnessFlake || f.Replays == 0 || f.Reproduced != 0 {
		t.Fatalf("executor-crash finding: %+v", f)
	}
	if r.ExitCode != ExitPass || r.Outcome != "pass" || r.Counts.NewGroups != 0 || r.Counts.HarnessFlakes != 1 || r.HarnessFlakeRuns != 1 {
		t.Fatalf("exit %d outcome %s counts %+v flake runs %d", r.ExitCode, r.Outcome, r.Counts, r.HarnessFlakeRuns)
	}
	if !strings.Contains(r.Reason, "unreproduced executor death") || !strings.Contains(r.Summary(), "harness-flake executor-crash") {
		t.Fatalf("not reported: %s\n%s", r.Reason, r.Summary())
	}
	if !strings.Contains(r.junit, "harness health: unreproduced executor deaths &lt;= 1") || strings.Contains(r.junit, `type="harness-unhealthy"`) {
		t.Fatalf("JUnit harness health case wrong:\n%s", r.junit)
	}
	// The finding directory has what explains it.
	for _, name := range []string{"console.txt", "executor-state.txt", "executor-stderr.txt"} {
		if _, err := os.Stat(filepath.Join(f.Dir, name)); err != nil {
			t.Errorf("finding lacks %s: %v", name, err)
		}
	}

	// Oracle cases say how much each judged; one that judged nothing is
	// skipped in the JUnit output, never a silent pass.
	for _, o := range r.Oracles {
		if o.Oracle == "snapshot" && o.Judgments == 0 {
			t.Fatalf("the snapshot oracle judged no page in %d programs", r.Programs)
		}
		if o.Judgments == 0 && o.NotApplicable == "" && o.New+o.Known+o.Preexisting+o.HarnessFlakes == 0 &&
			!strings.Contains(r.junit, `<testcase name="`+o.Oracle+`" classname="forkfuzz.oracles" time="0.000">`+"\n"+`   <skipped message="not exercised`) {
			t.Errorf("oracle %s judged nothing but its JUnit case is not skipped", o.Oracle)
		}
		t.Logf("oracle %s: %d %s", o.Oracle, o.Judgments, o.Needs)
	}

	// No tolerance: the same is a harness error, exit 2, never a pass.
	r = runCrashGate(t, 0, &crashingTarget{Target: simTarget(t), crash: once})
	if r.ExitCode != ExitError || !strings.HasPrefix(r.Reason, "harness unhealthy") || !strings.Contains(r.junit, `type="harness-unhealthy"`) {
		t.Fatalf("want exit 2 for an unhealthy harness, got %d: %s", r.ExitCode, r.Reason)
	}
}

// A kernel that kills the executor every time a program forks twice
// still fails the gate; so does a one-off death whose console shows a
// kernel report.
func TestGateReproducibleExecutorDeath(t *testing.T) {
	always := func(run int64, p *prog.Program) bool { return p.NumForks() >= 2 }
	r := runCrashGate(t, 1, &crashingTarget{Target: simTarget(t), crash: always})
	f := findingOf(r, "executor-crash")
	if f == nil || f.Status != StatusNew || f.Reproduced == 0 || r.ExitCode != ExitFindings {
		t.Fatalf("exit %d, finding %+v", r.ExitCode, f)
	}
	report := "[ 9.1] BUG: unable to handle page fault for address: ffff888000000000\n[ 9.1] #PF: supervisor read access in kernel mode\n"
	once := func(run int64, p *prog.Program) bool { return run == 60 }
	r = runCrashGate(t, 1, &crashingTarget{Target: simTarget(t), crash: once, console: report})
	if f := findingOf(r, "executor-crash"); f == nil || f.Status != StatusNew || r.ExitCode != ExitFindings {
		t.Fatalf("a death with a kernel report on the console: exit %d, finding %+v", r.ExitCode, f)
	}
}

// A corpus program whose run killed the executor once is replayed (3
// times) before it counts: a one-off is a harness flake there too, with
// the corpus case showing it, not failing.
func TestGateCorpusExecutorDeathReplayed(t *testing.T) {
	once := func(run int64, p *prog.Program) bool { return run == 2 }
	r := runCrashGate(t, 1, &crashingTarget{Target: simTarget(t), crash: once})
	f := findingOf(r, "executor-crash")
	if f == nil || !strings.HasPrefix(f.Source, "corpus:") || f.Status != StatusHarnessFlake || f.Replays != corpusEventReplays || f.Reproduced != 0 {
		t.Fatalf("corpus executor-crash finding: %+v", f)
	}
	if r.ExitCode != ExitPass || r.HarnessFlakeRuns != 1 {
		t.Fatalf("exit %d, flake runs %d: %s", r.ExitCode, r.HarnessFlakeRuns, r.Reason)
	}
}
