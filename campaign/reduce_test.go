package campaign

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/minimize"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// crashTarget answers like the model, except that the executor "dies" on
// programs with at least minOps ops (a crash the program causes), and
// after refuseAfter runs (0: never) it refuses every run, as the gate's
// budget wrapper does at the end of the budget.
type crashTarget struct {
	modelTarget
	minOps      int
	refuseAfter int64
	n           atomic.Int64
}

func (c *crashTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if n := c.n.Add(1); c.refuseAfter > 0 && n > c.refuseAfter {
		return nil, errors.New("budget spent, run refused")
	}
	if c.minOps > 0 && len(p.Ops) >= c.minOps {
		return nil, &executor.CrashError{Status: "signal: segmentation fault"}
	}
	return c.modelTarget.Run(p, opt)
}

func crashFinding(t *testing.T) *Finding {
	p := NewProgram(3, 1, nil, gen.DefaultWeights())
	if len(p.Ops) < 4 {
		t.Fatalf("program too short: %d ops", len(p.Ops))
	}
	return &Finding{Issue: judge.Issue{Signature: "executor-crash", Oracle: "executor-crash"}, Program: p}
}

// An executor death that does not happen again is not minimized (the
// minimizer's runs would all fail); its replays say 0/5.
func TestReduceUnrepeatedFinding(t *testing.T) {
	f := crashFinding(t)
	tg := &crashTarget{} // never crashes: the finding was a one-off
	ReduceContext(context.Background(), tg, f, 300, 0, "")
	if !f.NotRepeated || f.MinRuns != flakyReruns || len(f.Minimized.Ops) != len(f.Program.Ops) {
		t.Fatalf("not repeated %v, %d minimization runs, %d of %d ops", f.NotRepeated, f.MinRuns, len(f.Minimized.Ops), len(f.Program.Ops))
	}
	if f.Replays != 5 || f.Reproduced != 0 || tg.n.Load() != flakyReruns+5 {
		t.Fatalf("reproduced %d/%d in %d runs, want 0/5 in %d", f.Reproduced, f.Replays, tg.n.Load(), flakyReruns+5)
	}
	if r := f.Report(); !strings.Contains(r, "did not fail again on 3 reruns; reproduced 0/5 replays") {
		t.Fatalf("report:\n%s", r)
	}
	// With a budget of one run, the report says only one was made.
	f = crashFinding(t)
	ReduceContext(context.Background(), &crashTarget{}, f, 1, 0, "")
	if r := f.Report(); !f.NotRepeated || !strings.Contains(r, "did not fail again on 1 reruns (the minimization budget allowed 1 of 3); reproduced 0/5") {
		t.Fatalf("budget of 1 run: report:\n%s", r)
	}
}

// raceTarget crashes on programs that still have every needed line,
// on the runs fire says: a race that needs some of the program's
// operations and fires on some runs.
type raceTarget struct {
	crashTarget
	needed []string
	fire   func(n int64) bool
}

func (r *raceTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	n := r.n.Add(1)
	text := string(p.Format())
	has := true
	for _, l := range r.needed {
		has = has && strings.Contains(text, "\n"+l+"\n")
	}
	if has && r.fire(n) {
		return nil, &executor.CrashError{Status: "signal: segmentation fault"}
	}
	return r.modelTarget.Run(p, opt)
}

// raceOn returns a raceTarget for f that needs four of its main
// process's store lines and fires with probability p (seeded), except
// that the first runs answer as first says.
func raceOn(t *testing.T, f *Finding, seed uint64, p float64, first ...bool) *raceTarget {
	rng := rand.New(rand.NewPCG(seed, 1))
	r := &raceTarget{fire: func(n int64) bool {
		if int(n) <= len(first) {
			return first[n-1]
		}
		return rng.Float64() < p
	}}
	for _, l := range strings.Split(string(f.Program.Format()), "\n") {
		if strings.HasPrefix(l, "store ") && len(r.needed) < 4 {
			r.needed = append(r.needed, l)
		}
	}
	if len(r.needed) < 4 {
		t.Fatalf("the program has %d store lines of the main process, want 4", len(r.needed))
	}
	return r
}

// A finding that fails again only on its third rerun (a race) is
// minimized, where it used to be kept whole: the table's migration-wp
// rows (98/98, 58/58, 26/26 ops) had not failed on their first rerun.
// Every step then gets three runs.
func TestReduceFlakyFinding(t *testing.T) {
	f := crashFinding(t)
	tg := raceOn(t, f, 1, 0.3, false, false, true)
	ReduceContext(context.Background(), tg, f, 120, 0, "")
	if f.NotRepeated || f.MinTries != 3 {
		t.Fatalf("not repeated %v, %d tries a step; want 3", f.NotRepeated, f.MinTries)
	}
	if len(f.Minimized.Ops) >= len(f.Program.Ops) {
		t.Fatalf("minimized to %d of %d ops", len(f.Minimized.Ops), len(f.Program.Ops))
	}
	if r := f.Report(); !strings.Contains(r, "up to 3 a step (it failed again on rerun 3 of 3: a race)") {
		t.Fatalf("report:\n%s", r)
	}
	t.Logf("race: %d of %d ops kept in %d runs, reproduced %d/%d", len(f.Minimized.Ops), len(f.Program.Ops), f.MinRuns, f.Reproduced, f.Replays)
}

// Three runs a step shrink a race that fires one run in four further
// than one run a step in the same 40 runs (measured: 9.9 against 18.9
// ops kept, mean of 30 seeds; the gap is smaller for likelier races).
func TestTriesShrinkRaces(t *testing.T) {
	const budget, seeds = 40, 30
	mean := func(k int) float64 {
		sum := 0
		for seed := uint64(0); seed < seeds; seed++ {
			f := crashFinding(t)
			tg := raceOn(t, f, seed, 0.25)
			runs := 0
			m, _ := minimize.Minimize(f.Program, tries(k, func(q *prog.Program) bool {
				if runs >= budget {
					return false
				}
				runs++
				o, err := tg.Run(q, agents.Options{})
				v, herr := judge.Judge(q, o, err)
				return herr == nil && v.Has(f.Issue.Signature)
			}), minimize.MaxAttempts(budget))
			sum += len(m.Ops)
		}
		return float64(sum) / seeds
	}
	one, three := mean(1), mean(3)
	t.Logf("ops kept in %d runs, mean of %d seeds: one run a step %.1f, three %.1f", budget, seeds, one, three)
	if three >= one {
		t.Fatalf("three runs a step kept %.1f ops, one %.1f: no better", three, one)
	}
}

// A crash the program causes every time is minimized and reproduces 5/5.
func TestReduceRepeatedCrash(t *testing.T) {
	f := crashFinding(t)
	tg := &crashTarget{minOps: 2}
	ReduceContext(context.Background(), tg, f, 300, 0, "")
	if f.NotRepeated || len(f.Minimized.Ops) != 2 || f.Replays != 5 || f.Reproduced != 5 {
		t.Fatalf("not repeated %v, minimized to %d ops, reproduced %d/%d", f.NotRepeated, len(f.Minimized.Ops), f.Reproduced, f.Replays)
	}
}

// Replays the target refused (the budget was spent) are not failures to
// reproduce: they were counted as 0/5 before.
func TestReduceRefusedReplaysNotCounted(t *testing.T) {
	f := crashFinding(t)
	tg := &crashTarget{minOps: 1, refuseAfter: 1} // the first rerun crashes, then every run is refused
	ReduceContext(context.Background(), tg, f, 300, 0, "")
	if f.Replays != 0 || f.Reproduced != 0 || f.ReplayErrors != 10 {
		t.Fatalf("reproduced %d/%d with %d replay errors, want 0/0 with 10", f.Reproduced, f.Replays, f.ReplayErrors)
	}
	if r := f.Report(); !strings.Contains(r, "reproduced 0/0 replays") || !strings.Contains(r, "10 more replay runs gave no verdict") {
		t.Fatalf("report:\n%s", r)
	}
}

// lateTarget fails the original program every time, and any shorter one
// only during the minimizer's first runs (as a kernel report that a
// previous run left behind would): the minimized program then never
// reproduces, and the original is kept.
type lateTarget struct {
	crashTarget
	orig  int
	until int64
}

func (l *lateTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if n := l.n.Add(1); len(p.Ops) == l.orig || n <= l.until {
		return nil, &executor.CrashError{Status: "signal: segmentation fault"}
	}
	return l.modelTarget.Run(p, opt)
}

func TestReduceKeepsOriginalWhenMinimizedNeverReproduces(t *testing.T) {
	f := crashFinding(t)
	tg := &lateTarget{orig: len(f.Program.Ops), until: 4}
	ReduceContext(context.Background(), tg, f, 300, 0, "")
	if f.MinDropped == nil || len(f.MinDropped.Ops) >= len(f.Program.Ops) || f.MinDroppedReplays != 5 {
		t.Fatalf("dropped %v (%d replays), minimized to %d of %d ops", f.MinDropped != nil, f.MinDroppedReplays, len(f.Minimized.Ops), len(f.Program.Ops))
	}
	if f.Minimized != f.Program || f.Reproduced != 5 || f.Replays != 5 {
		t.Fatalf("kept %d of %d ops, reproduced %d/%d", len(f.Minimized.Ops), len(f.Program.Ops), f.Reproduced, f.Replays)
	}
	r := f.Report()
	if !strings.Contains(r, "reproduced 0/5 replays, so the original is kept; reproduced 5/5 replays") {
		t.Fatalf("report:\n%s", r)
	}
	// Loading the report back counts the original's replays.
	dir := t.TempDir()
	s := &FindingStore{Dir: dir}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Save(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "minimized-dropped.ffz")); err != nil {
		t.Errorf("the dropped minimized program is not on disk: %v", err)
	}
}

// TestSealEndsSaves: once a store's seal is closed, Save writes nothing
// (ErrSealed) and what was saved before stays as it was; Close waits for
// a save in progress.
func TestSealEndsSaves(t *testing.T) {
	f := crashFinding(t)
	seal := NewSeal()
	s := &FindingStore{Dir: t.TempDir(), Seal: seal}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Save(f)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(d, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// A save in progress holds the seal: Close waits for it.
	if !seal.hold() {
		t.Fatal("an open seal refused a save")
	}
	closed := make(chan struct{})
	go func() { seal.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a save was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	seal.release()
	<-closed
	f.Minimized = f.Program
	f.Reproduced, f.Replays = 5, 5
	if _, err := s.Save(f); !errors.Is(err, ErrSealed) {
		t.Fatalf("Save after Close: %v, want ErrSealed", err)
	}
	after, err := os.ReadFile(filepath.Join(d, "report.txt"))
	if err != nil || string(after) != string(before) {
		t.Errorf("the sealed finding changed on disk (%v)", err)
	}
}

// hangTarget hangs (an executor hang, as the target reports one) on runs
// whose number hangs says, and answers like the model otherwise.
type hangTarget struct {
	modelTarget
	hangs func(n int64) bool
	n     atomic.Int64
}

func (h *hangTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if h.hangs(h.n.Add(1)) {
		return nil, &executor.CrashError{Hang: true, Status: "no answer within " + opt.Timeout.String()}
	}
	return h.modelTarget.Run(p, opt)
}

// A hang's replays stop once hangReplaysEnough came back (each may cost
// a long timeout and a VM restart); other findings keep all five, and
// every replay run's outcome and time is reported.
func TestReduceHangReplaysStopWhenDecided(t *testing.T) {
	hang := judge.Issue{Signature: "executor-hang", Oracle: "executor-hang"}
	for _, tc := range []struct {
		name                string
		hangs               func(n int64) bool
		replays, reproduced int
		outcomes            []string
		stopNote            bool
	}{
		// The rerun hangs, then every replay: two are enough.
		{"always", func(int64) bool { return true }, 2, 2, []string{"reproduced", "reproduced"}, true},
		// Odd runs hang: run 1 is the rerun (minimization gets no more
		// runs), replays are runs 2-5.
		{"every other", func(n int64) bool { return n%2 == 1 }, 4, 2, []string{"passed", "reproduced", "passed", "reproduced"}, true},
		// Only the rerun hangs: five replays, none came back.
		{"once", func(n int64) bool { return n == 1 }, 5, 0, []string{"passed", "passed", "passed", "passed", "passed"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := crashFinding(t)
			f.Issue, f.RunTime = hang, 10*time.Second
			ReduceContext(context.Background(), &hangTarget{hangs: tc.hangs}, f, 1, 0, "")
			if f.Replays != tc.replays || f.Reproduced != tc.reproduced {
				t.Fatalf("reproduced %d/%d, want %d/%d", f.Reproduced, f.Replays, tc.reproduced, tc.replays)
			}
			var got []string
			for _, r := range f.ReplayRuns {
				got = append(got, r.Outcome)
			}
			if strings.Join(got, ",") != strings.Join(tc.outcomes, ",") {
				t.Fatalf("replay outcomes %v, want %v", got, tc.outcomes)
			}
			note := f.ReplayRunsNote()
			if stop := strings.Contains(note, "a hang's replays stop once 2 came back (each may take the replay timeout, 1m0s"); stop != tc.stopNote {
				t.Fatalf("stop note %v, want %v: %q", stop, tc.stopNote, note)
			}
			if r := f.Report(); !strings.Contains(r, "replays:  "+note) {
				t.Fatalf("report has no replay runs line %q:\n%s", note, r)
			}
		})
	}
	// Not a hang: all five replays.
	f := crashFinding(t)
	ReduceContext(context.Background(), &crashTarget{minOps: 1}, f, 1, 0, "")
	if f.Replays != 5 || f.Reproduced != 5 || len(f.ReplayRuns) != 5 || !strings.HasPrefix(f.ReplayRunsNote(), "5 reproduced (") {
		t.Fatalf("crash: reproduced %d/%d, %d runs, note %q", f.Reproduced, f.Replays, len(f.ReplayRuns), f.ReplayRunsNote())
	}
}
