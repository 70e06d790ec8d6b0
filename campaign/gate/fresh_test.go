package gate

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// freshGate runs a gate whose every Open makes a new crashingTarget
// with crash and console; it returns the result and how often the target
// was opened.
func freshGate(t *testing.T, crash func(int64, *prog.Program) bool, console string) (*Result, int64) {
	t.Helper()
	var opens atomic.Int64
	cfg := Config{
		Open: func() (agents.Target, error) {
			opens.Add(1)
			return &crashingTarget{Target: simTarget(t), crash: crash, console: console}, nil
		},
		Kernel: KernelIdentity{Target: "sim-eager"}, Budget: 12 * time.Second, Seed: 7,
		Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 20, MaxHarnessFlakes: 1,
	}
	r := Run(context.Background(), cfg)
	t.Logf("exit %d, %d opens: %s\n%s", r.ExitCode, opens.Load(), r.Reason, r.Summary())
	return r, opens.Load()
}

// Every finding against the kernel is replayed at the end on fresh
// targets (a new one per replay): 2 of at most 5 showing its signature
// make it reproducible; fewer make it flaky with its rate, in every
// output's wording.
func TestGateFreshValidation(t *testing.T) {
	always := func(run int64, p *prog.Program) bool { return p.NumForks() >= 2 }
	r, opens := freshGate(t, always, "")
	f := findingOf(gateRun{Result: r}, "executor-crash")
	if f == nil || f.Fresh == nil || f.Fresh.Runs != 2 || f.Fresh.Reproduced != 2 || opens < 3 {
		t.Fatalf("opens %d, finding %+v", opens, f)
	}
	if want := "reproducible 2/2 on fresh VMs"; !strings.Contains(r.Summary(), want) || f.Reproducibility() != want {
		t.Fatalf("want %q in %q", want, f.Reproducibility())
	}
	// A one-off death with a kernel report: the fresh targets never show
	// it again (each counts its runs from 1).
	report := "[ 9.1] BUG: unable to handle page fault for address: ffff888000000000\n[ 9.1] #PF: supervisor read access in kernel mode\n"
	once := func(run int64, p *prog.Program) bool { return run == 60 }
	r, _ = freshGate(t, once, report)
	f = findingOf(gateRun{Result: r}, "executor-crash")
	if f == nil || f.Fresh == nil {
		t.Fatalf("finding %+v", f)
	}
	if got := f.Reproducibility(); !strings.HasPrefix(got, "flaky 0/") || !strings.Contains(got, "on fresh VMs") {
		t.Fatalf("reproducibility %q (fresh %+v)", got, f.Fresh)
	}
	if f.Fresh.Runs == 5 && strings.Contains(f.Fresh.Note, "budget") {
		t.Fatalf("fresh %+v", f.Fresh)
	}
}

// A fresh validation cut by the budget says so, never silently.
func TestFreshVerdictWording(t *testing.T) {
	for _, c := range []struct {
		v    *FreshReplay
		want string
	}{
		{&FreshReplay{Runs: 3, Reproduced: 2}, "reproducible 2/3 on fresh VMs"},
		{&FreshReplay{Runs: 5, Reproduced: 1}, "flaky 1/5 on fresh VMs (reproducible takes 2)"},
		{&FreshReplay{Runs: 1, Reproduced: 1, Note: "budget spent: 2s left, a fresh target takes 3s to come up"},
			"shown 1/1 on fresh VMs, too few runs to say reproducible (takes 2); budget spent: 2s left, a fresh target takes 3s to come up"},
		{&FreshReplay{Runs: 2, Reproduced: 1}, "flaky 1/2 on fresh VMs (reproducible takes 2)"},
		{&FreshReplay{Note: "budget spent: 0s left, a fresh target takes 3s to come up"},
			"not validated on fresh VMs (budget spent: 0s left, a fresh target takes 3s to come up)"},
		{&FreshReplay{OffSite: 10}, "not validated on fresh VMs (all 10 runs injected their fault at another allocation than the finding's run)"},
		{&FreshReplay{Runs: 3, Reproduced: 2, OffSite: 1},
			"reproducible 2/3 on fresh VMs; 1 more runs injected their fault at another allocation than the finding's run and were not counted"},
		{&FreshReplay{Runs: 5, Reproduced: 0, OffSite: 2},
			"flaky 0/5 on fresh VMs (reproducible takes 2); 2 more runs injected their fault at another allocation than the finding's run and were not counted"},
	} {
		f := &FindingRecord{Replays: 5, Reproduced: 5, Fresh: c.v}
		if got := f.Reproducibility(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.v, got, c.want)
		}
	}
}

// blockingTarget's runs last until it is closed.
type blockingTarget struct {
	agents.Target
	closed chan struct{}
	once   atomic.Bool
}

func (b *blockingTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	<-b.closed
	return nil, errors.New("closed during the run")
}

func (b *blockingTarget) Close() error {
	if b.once.CompareAndSwap(false, true) {
		close(b.closed)
	}
	return nil
}

// A fresh replay still going at the phase's stop is abandoned there (its
// target closed), never waited for past the budget (a 2-minute gate once
// ended after 135 s on one), and a run that ends in time closes its
// target too.
func TestRunByStop(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1 thp=off\nstore r0 off=0x0 count=1 stride=0x1000\nfork f0\nf0: check\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := &blockingTarget{Target: simTarget(t), closed: make(chan struct{})}
	t0 := time.Now()
	_, err = runBy(b, p, agents.Options{}, t0.Add(200*time.Millisecond))
	if err != errBudget || time.Since(t0) > 2*time.Second {
		t.Fatalf("runBy: %v after %v, want errBudget at the stop", err, time.Since(t0))
	}
	select {
	case <-b.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned target was not closed")
	}
	c := &closeCounter{Target: simTarget(t)}
	o, err := runBy(c, p, agents.Options{}, time.Now().Add(time.Minute))
	if err != nil || o == nil || c.closes.Load() != 1 {
		t.Fatalf("a run in time: %v, %d closes", err, c.closes.Load())
	}
}

type closeCounter struct {
	agents.Target
	closes atomic.Int64
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return c.Target.Close()
}

// With OpenFresh set (the CLI's one-VM opener for a --vms N pool), the
// fresh replays open their targets through it, never through Open.
func TestGateOpenFresh(t *testing.T) {
	var opens, fresh atomic.Int64
	always := func(run int64, p *prog.Program) bool { return p.NumForks() >= 2 }
	cfg := Config{
		Open: func() (agents.Target, error) {
			opens.Add(1)
			return &crashingTarget{Target: simTarget(t), crash: always}, nil
		},
		OpenFresh: func() (agents.Target, error) {
			fresh.Add(1)
			return &crashingTarget{Target: simTarget(t), crash: always}, nil
		},
		Kernel: KernelIdentity{Target: "sim-eager"}, Budget: 12 * time.Second, Seed: 7,
		Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 20, MaxHarnessFlakes: 1,
	}
	r := Run(context.Background(), cfg)
	f := findingOf(gateRun{Result: r}, "executor-crash")
	if f == nil || f.Fresh == nil || f.Fresh.Runs != 2 || opens.Load() != 1 || fresh.Load() != 2 {
		for _, g := range r.Findings {
			t.Logf("finding %s from %s, fresh %+v", g.Signature, g.Source, g.Fresh)
		}
		t.Fatalf("opens %d, fresh opens %d, finding %+v", opens.Load(), fresh.Load(), f)
	}
}

// A baseline that breaks before the finding's program can be judged (a
// kernel BUG of its own: here an executor death on every run) shows
// neither that it has the finding nor that it does not: the finding's
// baseline runs are inconclusive, never "passes on the baseline (0/3)"
// (the Async-fork gate once blamed the fixed kernel for a bug the unfixed
// one hid behind another BUG), and it stays new, saying why.
func TestGateBaselineBreaksFirst(t *testing.T) {
	mut, err := sim.NewTarget(sim.Config{Mode: sim.Eager, Mutant: "eager-no-wrprotect"})
	if err != nil {
		t.Fatal(err)
	}
	always := func(run int64, p *prog.Program) bool { return true }
	cfg := Config{
		Open:         func() (agents.Target, error) { return mut, nil },
		OpenBaseline: func() (agents.Target, error) { return &crashingTarget{Target: simTarget(t), crash: always}, nil },
		Kernel:       KernelIdentity{Target: "sim-eager"}, Baseline: &KernelIdentity{Target: "sim-eager"},
		Budget: 12 * time.Second, Seed: 7, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 20,
	}
	r := Run(context.Background(), cfg)
	var f *FindingRecord
	for i := range r.Findings {
		if b := r.Findings[i].Baseline; b != nil && b.Inconclusive > 0 {
			f = &r.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no finding with inconclusive baseline runs: %s\n%s", r.Reason, r.Summary())
	}
	b := f.Baseline
	if b.Runs != 0 || b.Reproduced != 0 || b.Inconclusive != 6 || !slices.Contains(b.Other, "executor-crash") {
		t.Fatalf("baseline %+v", b)
	}
	if f.Status != StatusNew || !strings.Contains(f.StatusReason, "inconclusive") || strings.Contains(f.StatusReason, "passes on the baseline") {
		t.Fatalf("%s: status %s: %s", f.Signature, f.Status, f.StatusReason)
	}
	if table := BaselineTable(r); !strings.Contains(table, "| `"+f.Signature+"` | -[^") || !strings.Contains(table, "inconclusive: the baseline broke first in") {
		t.Fatalf("table:\n%s", table)
	}
}
