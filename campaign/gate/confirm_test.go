package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// slowTarget is the simulated kernel on which one program (the one of
// run `at`) runs out of time whenever it gets the target's usual
// timeout: a slow program on a loaded guest (longer: false), or a
// program the kernel hangs whatever the timeout (longer: true).
type slowTarget struct {
	*sim.Target
	at     int64
	always bool
	// vmHang: with a longer timeout the slow program hangs the VM.
	vmHang bool

	mu   sync.Mutex
	n    int64
	slow string
	// timeouts are the Options.Timeout of the runs of the slow program.
	timeouts []time.Duration
}

func (s *slowTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	text := string(p.Format())
	s.mu.Lock()
	s.n++
	if s.n == s.at {
		s.slow = text
	}
	slow := text == s.slow
	if slow {
		s.timeouts = append(s.timeouts, opt.Timeout)
	}
	s.mu.Unlock()
	if slow && s.vmHang && opt.Timeout > 0 {
		return nil, &vm.KernelReportError{Title: "VM hang: no result within the program timeout", Kind: "hang", Console: "[ 9.1] forkfuzz: program started\n"}
	}
	if slow && (s.always || opt.Timeout == 0) {
		return nil, &executor.CrashError{Hang: true, Status: "no answer within 1m0s", State: "State: R (running)\n"}
	}
	return s.Target.Run(p, opt)
}

// The gate once failed the unmodified reference kernel on an executor
// hang: a slow program under load that passed alone with a longer
// timeout. A hang the campaign saw (and whose reruns with the same
// timeout hung again) is replayed with a longer timeout before it counts:
// passing there, it is a harness flake, never a finding (it was exit 1).
func TestGateSlowProgramNotBlamed(t *testing.T) {
	tg := &slowTarget{Target: simTarget(t), at: 60}
	r := runGate(t, 1, tg)
	f := findingOf(r, "executor-hang")
	if f == nil {
		t.Fatalf("no executor-hang finding (runs %d)", tg.n)
	}
	if f.Status != StatusHarnessFlake || f.Confirm == nil || f.Confirm.Runs == 0 || f.Confirm.Reproduced != 0 || f.Confirm.TimeoutS <= 0 {
		t.Fatalf("slow program's hang: %+v (confirm %+v)", f, f.Confirm)
	}
	if r.ExitCode != ExitPass || r.Counts.NewGroups != 0 {
		t.Fatalf("a slow program failed the gate: exit %d: %s", r.ExitCode, r.Reason)
	}
	if !strings.Contains(r.Summary(), "harness-flake executor-hang") || !strings.Contains(f.StatusReason, "with a timeout of") {
		t.Fatalf("not said: %s\n%s", f.StatusReason, r.Summary())
	}
	var longer bool
	for _, d := range tg.timeouts {
		longer = longer || d > 0
	}
	if !longer {
		t.Fatalf("the slow program never ran with a longer timeout: %v", tg.timeouts)
	}
	if ph := phaseOf(r, "confirm"); ph == nil || !strings.Contains(ph.Note, "executor-hang: 0/") {
		t.Fatalf("confirm phase: %+v", ph)
	}
	// Its directory has the report pages (passed to the finding store
	// explicitly, no init hook).
	for _, name := range []string{"report.html", "report.json"} {
		if _, err := os.Stat(filepath.Join(f.Dir, name)); err != nil {
			t.Errorf("finding lacks %s: %v", name, err)
		}
	}
	// The JSON carries what the verdicts rested on as data.
	if r.Tally.Runs == 0 || r.Tally.Ops == 0 || r.Tally.Runs < int(r.FuzzPrograms) {
		t.Fatalf("tally %+v for %d fuzzed programs", r.Tally, r.FuzzPrograms)
	}
}

// A program the kernel hangs whatever the timeout still fails the gate.
func TestGateRealHangBlamed(t *testing.T) {
	tg := &slowTarget{Target: simTarget(t), at: 60, always: true}
	r := runGate(t, 1, tg)
	f := findingOf(r, "executor-hang")
	if f == nil || f.Status != StatusNew || f.Confirm == nil || f.Confirm.Reproduced == 0 || r.ExitCode != ExitFindings {
		t.Fatalf("exit %d, finding %+v", r.ExitCode, f)
	}
}

// An executor hang whose longer replays hang the whole VM hung again:
// the kernel's, and the reason says what it came back as (it was a
// harness flake, exit 0, while replays had to show the same signature).
func TestGateHangBackAsVMHang(t *testing.T) {
	tg := &slowTarget{Target: simTarget(t), at: 60, vmHang: true}
	r := runGate(t, 1, tg)
	f := findingOf(r, "executor-hang")
	if f == nil || f.Status != StatusNew || f.Confirm == nil || f.Confirm.Reproduced == 0 || r.ExitCode != ExitFindings {
		t.Fatalf("exit %d, finding %+v", r.ExitCode, f)
	}
	if !strings.HasPrefix(f.Confirm.As, "kernel-hang/VM-hang") || !strings.Contains(f.StatusReason, "(as kernel-hang/VM-hang") {
		t.Fatalf("not said what it came back as: %q, %s", f.Confirm.As, f.StatusReason)
	}
}

func phaseOf(r gateRun, name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// Harness trouble is decided by replays; never replayed, it is an error
// of the gate (exit 2), never a finding, and a hang is decided only by
// replays with a longer timeout than the one it ran out of.
func TestTroubleStatus(t *testing.T) {
	dir := t.TempDir()
	withReport := filepath.Join(dir, "report")
	os.MkdirAll(withReport, 0o755)
	os.WriteFile(filepath.Join(withReport, "console.txt"), []byte("[ 9.1] BUG: unable to handle page fault for address: ffff888000000000\n"), 0o644)
	// The guest OOM killer's dump matches report.Contains's prefilter
	// (" swap ") but holds no report: the death is still trouble.
	withOOM := filepath.Join(dir, "oom")
	os.MkdirAll(withOOM, 0o755)
	os.WriteFile(filepath.Join(withOOM, "console.txt"), []byte("[ 9.1] Free swap  = 0kB\n[ 9.1] Total swap = 0kB\n[ 9.1] 0 pages in swap cache\n"+
		"[ 9.2] Out of memory: Killed process 212 (forkfuzz-exec) total-vm:1048576kB\n"), 0o644)
	tests := []struct {
		name     string
		f        FindingRecord
		trouble  bool
		status   string
		exitCode int
	}{
		{"hang never replayed", FindingRecord{Signature: "executor-hang"}, true, StatusUnconfirmed, ExitError},
		{"hang replayed with its own timeout only", FindingRecord{Signature: "executor-hang", Replays: 5, Reproduced: 5}, true, StatusUnconfirmed, ExitError},
		{"hang passed with a longer timeout", FindingRecord{Signature: "executor-hang", Replays: 5, Reproduced: 5, Confirm: &ConfirmReplay{Runs: 1, TimeoutS: 240}}, true, StatusHarnessFlake, ExitPass},
		{"hang again with a longer timeout", FindingRecord{Signature: "executor-hang", Confirm: &ConfirmReplay{Runs: 1, Reproduced: 1, TimeoutS: 240}}, true, StatusNew, ExitFindings},
		{"death never replayed", FindingRecord{Signature: "executor-crash"}, true, StatusUnconfirmed, ExitError},
		{"death replayed, gone", FindingRecord{Signature: "executor-crash", Replays: 3}, true, StatusHarnessFlake, ExitPass},
		{"death replayed, back", FindingRecord{Signature: "executor-crash", Replays: 3, Reproduced: 1}, true, StatusNew, ExitFindings},
		// A replay that failed with a kernel report instead is the
		// kernel's, not a flake (it used to be one: exit 0).
		{"death replayed, gone, a replay showed a kernel bug", FindingRecord{Signature: "executor-crash", Replays: 3, ReplayShowed: []string{"kernel-bug/BUG-Bad-page-state"}}, true, StatusNew, ExitFindings},
		{"lost connection never replayed", FindingRecord{Signature: "kernel-lost-connection/lost-connection-to-VM"}, true, StatusUnconfirmed, ExitError},
		{"VM hang never replayed", FindingRecord{Signature: "kernel-hang/VM-hang--no-result-within-the-program-timeout"}, true, StatusUnconfirmed, ExitError},
		{"a kernel report is the kernel's", FindingRecord{Signature: "kernel-bug/BUG-Bad-page-state"}, false, StatusNew, ExitFindings},
		// A stall the kernel reported counts once it comes back: a TCG
		// guest the loaded host starves reports stalls too.
		{"a stall never replayed", FindingRecord{Signature: "kernel-hang/INFO-rcu-detected-stall-in-copy_pte_range"}, true, StatusUnconfirmed, ExitError},
		{"a stall replayed, gone", FindingRecord{Signature: "kernel-hang/INFO-rcu-detected-stall-in-copy_pte_range", Replays: 5}, true, StatusHarnessFlake, ExitPass},
		{"a stall replayed, back", FindingRecord{Signature: "kernel-hang/INFO-rcu-detected-stall-in-copy_pte_range", Replays: 5, Reproduced: 2}, true, StatusNew, ExitFindings},
		{"a stall with a BUG on the console", FindingRecord{Signature: "kernel-hang/INFO-rcu-detected-stall-in-copy_pte_range", Dir: withReport, Replays: 5}, false, StatusNew, ExitFindings},
		{"a death with a report on the console", FindingRecord{Signature: "executor-crash", Dir: withReport}, false, StatusNew, ExitFindings},
		{"a death with the OOM killer's dump on the console", FindingRecord{Signature: "executor-crash", Dir: withOOM, Replays: 3}, true, StatusHarnessFlake, ExitPass},
		{"an oracle finding", FindingRecord{Signature: "snapshot:child-sees-parent-write", Replays: 0}, false, StatusNew, ExitFindings},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			if f.Dir == "" {
				f.Dir = dir
			}
			if got, _ := isTrouble(&f); got != tc.trouble {
				t.Fatalf("isTrouble = %v, want %v", got, tc.trouble)
			}
			g := &gate{cfg: Config{MaxHarnessFlakes: 1}, res: &Result{Findings: []FindingRecord{f}, Programs: 10}, sigRuns: map[string]int64{f.Signature: 1},
				ctx: t.Context(), start: time.Now()}
			g.classify()
			g.finish()
			got := g.res.Findings[0]
			if got.Status != tc.status || g.res.ExitCode != tc.exitCode {
				t.Fatalf("status %s exit %d (%s), want %s exit %d", got.Status, g.res.ExitCode, g.res.Reason, tc.status, tc.exitCode)
			}
			if tc.status == StatusUnconfirmed && (!strings.Contains(g.res.Reason, "never replayed") || g.res.Counts.UnconfirmedGroups != 1) {
				t.Fatalf("reason %q, counts %+v", g.res.Reason, g.res.Counts)
			}
			var junit strings.Builder
			if err := g.res.WriteJUnit(&junit); err != nil {
				t.Fatal(err)
			}
			if (tc.status == StatusUnconfirmed) != strings.Contains(junit.String(), `type="harness-unconfirmed"`) {
				t.Fatalf("JUnit's harness case for %s:\n%s", tc.status, junit.String())
			}
		})
	}
}

// hangingTarget is the simulated kernel on which every program with at
// least three forks hangs, whatever the timeout: the executor (vm false)
// or the whole VM (vm true).
type hangingTarget struct {
	*sim.Target
	vm bool
}

func (h *hangingTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if p.NumForks() < 3 {
		return h.Target.Run(p, opt)
	}
	if h.vm {
		return nil, &vm.KernelReportError{Title: "VM hang: no result within the program timeout", Kind: "hang", Console: "[ 9.1] forkfuzz: program started\n"}
	}
	return nil, &executor.CrashError{Hang: true, Status: "no answer within 1m0s", State: "State: R (running)\n"}
}

// A hang the baseline kernel shows as another hang (the same programs
// hang the executor on the kernel under test and the VM on the baseline)
// is pre-existing, never counted against the kernel under test.
func TestGateBaselineHangAsAnotherHang(t *testing.T) {
	cfg := Config{
		Open:         func() (agents.Target, error) { return &hangingTarget{Target: simTarget(t)}, nil },
		OpenBaseline: func() (agents.Target, error) { return &hangingTarget{Target: simTarget(t), vm: true}, nil },
		Kernel:       KernelIdentity{Target: "sim-eager"}, Baseline: &KernelIdentity{Target: "sim-eager"},
		Budget: 15 * time.Second, Seed: 7, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 5,
	}
	r := Run(context.Background(), cfg)
	f := findingOf(gateRun{Result: r}, "executor-hang")
	if f == nil || f.Baseline == nil {
		t.Fatalf("no executor-hang finding replayed on the baseline: %s\n%s", r.Reason, r.Summary())
	}
	if f.Baseline.Reproduced == 0 || f.Status != StatusPreexisting || !strings.Contains(f.Baseline.Note, "the hang came back as kernel-hang/VM-hang") {
		t.Fatalf("status %s (%s), baseline %+v", f.Status, f.StatusReason, f.Baseline)
	}
}

// slowTwin is a baseline kernel on which of's slow program runs out of
// time with the target's usual timeout only.
type slowTwin struct {
	*sim.Target
	of       *slowTarget
	timeouts []time.Duration
}

func (s *slowTwin) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	s.of.mu.Lock()
	slow := s.of.slow
	s.of.mu.Unlock()
	if string(p.Format()) == slow {
		s.timeouts = append(s.timeouts, opt.Timeout)
		if opt.Timeout == 0 {
			return nil, &executor.CrashError{Hang: true, Status: "no answer within 1m0s", State: "State: R (running)\n"}
		}
	}
	return s.Target.Run(p, opt)
}

// A hang confirmed with a longer timeout on the kernel under test is
// replayed on the baseline with that timeout too: with the usual one, a
// program merely slow there made the hang pre-existing (exit 0).
func TestBaselineHangLongerTimeout(t *testing.T) {
	tg := &slowTarget{Target: simTarget(t), at: 60, always: true}
	base := &slowTwin{Target: simTarget(t), of: tg}
	r := Run(context.Background(), Config{
		Open:         func() (agents.Target, error) { return tg, nil },
		OpenBaseline: func() (agents.Target, error) { return base, nil },
		Kernel:       KernelIdentity{Target: "sim-eager"}, Baseline: &KernelIdentity{Target: "sim-eager"},
		Budget: 12 * time.Second, Seed: 7, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 20,
	})
	f := findingOf(gateRun{Result: r}, "executor-hang")
	if f == nil {
		t.Fatalf("no executor-hang finding (runs %d)", tg.n)
	}
	if len(base.timeouts) == 0 || base.timeouts[0] == 0 {
		t.Fatalf("baseline runs of the hang with timeouts %v: want the confirm timeout", base.timeouts)
	}
	if f.Status != StatusNew || r.ExitCode != ExitFindings {
		t.Fatalf("hang: status %s (%s), exit %d; want new: the baseline does not hang with the longer timeout", f.Status, f.StatusReason, r.ExitCode)
	}
}

func TestHarnessErrorsTooMany(t *testing.T) {
	for _, tc := range []struct {
		errs, programs int64
		want           bool
	}{{0, 0, false}, {1, 0, false}, {2, 100, false}, {12, 100, true}, {2, 10, true}, {5, 1000, false}} {
		if got := harnessErrorsTooMany(tc.errs, tc.programs); got != tc.want {
			t.Errorf("%d harness errors in %d programs: %v, want %v", tc.errs, tc.programs, got, tc.want)
		}
	}
	g := &gate{res: &Result{Programs: 10, HarnessErrors: 5, MinPrograms: 1}, ctx: t.Context(), start: time.Now()}
	g.finish()
	if g.res.ExitCode != ExitError || !strings.Contains(g.res.Reason, "5 runs gave no verdict") {
		t.Fatalf("exit %d (%s): want an error, not a pass", g.res.ExitCode, g.res.Reason)
	}
}

// A harness flake counts at least the run that showed it, also when the
// fuzz phase left no per-signature counts (abandoned at the hard stop):
// two such flakes exceed a tolerance of one.
func TestHarnessFlakesCountedWithoutRunCounts(t *testing.T) {
	fs := []FindingRecord{{Signature: "executor-crash", Replays: 3, Dir: t.TempDir()}, {Signature: "kernel-lost-connection/lost-connection-to-VM", Replays: 3, Dir: t.TempDir()}}
	g := &gate{cfg: Config{MaxHarnessFlakes: 1}, res: &Result{Findings: fs, Programs: 10, MinPrograms: 1}, sigRuns: map[string]int64{}, ctx: t.Context(), start: time.Now()}
	g.classify()
	g.finish()
	if g.res.HarnessFlakeRuns != 2 || g.res.ExitCode != ExitError {
		t.Fatalf("%d flake runs, exit %d (%s): want 2 and an unhealthy harness", g.res.HarnessFlakeRuns, g.res.ExitCode, g.res.Reason)
	}
}

// slowTwinOnce is a baseline on which the slow program hangs on its
// first hangs runs whatever their timeout, then passes.
type slowTwinOnce struct {
	*sim.Target
	of    *slowTarget
	hangs int
	runs  int
}

func (s *slowTwinOnce) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	s.of.mu.Lock()
	slow := s.of.slow
	s.of.mu.Unlock()
	if string(p.Format()) == slow {
		s.runs++
		if s.runs <= s.hangs {
			return nil, &executor.CrashError{Hang: true, Status: "no answer within 2m0s", State: "State: R (running)\n"}
		}
	}
	return s.Target.Run(p, opt)
}

// One hang on the baseline (a loaded host can cause one on any kernel)
// used to make a hang that came back on the kernel under test
// pre-existing, exit 0. Harness trouble takes two baseline runs to be
// pre-existing; one leaves it undecided (exit 2).
func TestBaselineTroubleNeedsTwo(t *testing.T) {
	for _, tc := range []struct {
		hangs      int
		wantStatus string
		wantExit   int
	}{{1, StatusUnconfirmed, ExitError}, {99, StatusPreexisting, ExitPass}} {
		tg := &slowTarget{Target: simTarget(t), at: 60, always: true}
		base := &slowTwinOnce{Target: simTarget(t), of: tg, hangs: tc.hangs}
		r := Run(context.Background(), Config{
			Open:         func() (agents.Target, error) { return tg, nil },
			OpenBaseline: func() (agents.Target, error) { return base, nil },
			Kernel:       KernelIdentity{Target: "sim-eager"}, Baseline: &KernelIdentity{Target: "sim-eager"},
			Budget: 12 * time.Second, Seed: 7, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinimizeRuns: 20, BaselineReplays: 3,
		})
		f := findingOf(gateRun{Result: r}, "executor-hang")
		if f == nil {
			t.Fatalf("hangs %d: no executor-hang finding (runs %d)", tc.hangs, tg.n)
		}
		if f.Status != tc.wantStatus || r.ExitCode != tc.wantExit {
			t.Errorf("baseline hangs %d time(s): status %s (%s), exit %d (%s); want %s, exit %d",
				tc.hangs, f.Status, f.StatusReason, r.ExitCode, r.Reason, tc.wantStatus, tc.wantExit)
		}
	}
}
