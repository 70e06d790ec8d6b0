package campaign

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// phasedTarget is the reference model as a target that says its guest
// spent 2 ms on ops and 1 ms on views per program, and its processes
// 1.5 ms in forks and 0.5 ms in views.
type phasedTarget struct{ modelTarget }

func (p *phasedTarget) Run(q *prog.Program, opt agents.Options) (*obs.Observation, error) {
	o := checker.Expected(q)
	o.Phases = map[string]int64{"ops": 2000, "views": 1000}
	o.Work = map[string]int64{"fork": 1500, "view": 500}
	return o, nil
}

// A campaign says where its time went: the host's phases and the guest's,
// in Stats, in every stats sample, in a line.
func TestTimeSpent(t *testing.T) {
	dir := t.TempDir()
	st, err := Run(context.Background(), Config{Target: &phasedTarget{}, Seed: 9, Programs: 30, Weights: noThreads(gen.DefaultWeights()), Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sp := st.Spent
	if sp == nil || sp.Programs != 30 || sp.Run <= 0 || sp.Generate <= 0 || sp.Judge <= 0 {
		t.Fatalf("spent %+v", sp)
	}
	if got := sp.Guest["ops"]; got < 0.0599 || got > 0.0601 {
		t.Fatalf("guest ops %.4f s, want 0.06 (30 programs, 2 ms each)", got)
	}
	if got := sp.Work["fork"]; got < 0.0449 || got > 0.0451 {
		t.Fatalf("work fork %.4f s, want 0.045 (30 programs, 1.5 ms each)", got)
	}
	line := sp.String()
	if !strings.Contains(line, "run ") || !strings.Contains(line, "s/program") || !strings.Contains(line, "of the run: ops ") ||
		!strings.Contains(line, "in the program (summed over its processes): fork 75%, view 25%") {
		t.Fatalf("line %q", line)
	}
	sr, err := ReadStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	last := sr.Samples[len(sr.Samples)-1]
	if last.Spent == nil || last.Spent.Programs != 30 || last.Spent.Guest["views"] <= 0 || last.Spent.Work["view"] <= 0 {
		t.Fatalf("last sample's time: %+v", last.Spent)
	}
}

// Runs that return no observation (here an executor crash on every
// program without the census: programs 1 to 3 of 4) are counted apart,
// in Stats and in the line; minimization runs are not the campaign's.
func TestTimeSpentUnanswered(t *testing.T) {
	tg := &modeCrashTarget{crash: func(o agents.Options) bool { return o.NoForkPages }}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 4, Programs: 4, Weights: noThreads(gen.DefaultWeights()),
		MinimizeRuns: 5, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sp := st.Spent
	if sp == nil || sp.Programs != 4 || sp.UnansweredRuns != 3 || sp.Unanswered <= 0 || sp.Unanswered > sp.Run {
		t.Fatalf("spent %+v, want 3 of 4 runs unanswered, within the run's time", sp)
	}
	if line := sp.String(); !strings.Contains(line, "runs without a result (kernel reports, hangs, crashes): 3, ") {
		t.Fatalf("line %q", line)
	}
}

// censusTarget records which programs asked for no page census.
type censusTarget struct {
	modelTarget
	mu  sync.Mutex
	off map[string]bool
}

func (c *censusTarget) Parallel() int { return 1 }
func (c *censusTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	c.mu.Lock()
	c.off[string(p.Format())] = opt.NoForkPages
	c.mu.Unlock()
	return checker.Expected(p), nil
}

// The page census is taken for one program in CensusEvery (default 4).
func TestCensusEvery(t *testing.T) {
	for _, c := range []struct{ every, want int }{{0, 5}, {1, 20}, {-1, 0}, {10, 2}} {
		tg := &censusTarget{off: map[string]bool{}}
		if _, err := Run(context.Background(), Config{Target: tg, Seed: 4, Programs: 20, Weights: noThreads(gen.DefaultWeights()), CensusEvery: c.every}); err != nil {
			t.Fatal(err)
		}
		on := 0
		for _, off := range tg.off {
			if !off {
				on++
			}
		}
		if on != c.want {
			t.Errorf("CensusEvery %d: %d of 20 programs censused, want %d", c.every, on, c.want)
		}
	}
}

// optsTarget records the options of every run, in order (one machine).
type optsTarget struct {
	modelTarget
	mu   sync.Mutex
	opts []agents.Options
}

func (o *optsTarget) Parallel() int { return 1 }
func (o *optsTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	o.mu.Lock()
	o.opts = append(o.opts, opt)
	o.mu.Unlock()
	return checker.Expected(p), nil
}

// Kernel coverage is collected for one fresh program in CoverEvery
// (default 4) of a guided campaign (here no program comes from the
// corpus: the target reports no coverage) and one program in CoverEvery
// (default 8) of a blind one; kernel symbols are asked for only where
// coverage is collected.
func TestCoverEvery(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     Config
		covered []int
		every   int // the stats samples' cover_every
	}{
		{"guided", Config{}, []int{0, 4, 8, 12, 16}, 4},
		{"guided, every 1", Config{CoverEvery: 1}, nil, 0},
		{"blind", Config{Blind: true}, []int{0, 8, 16}, 8},
		{"blind, every 5", Config{Blind: true, CoverEvery: 5}, []int{0, 5, 10, 15}, 5},
		{"guided, every 10", Config{CoverEvery: 10}, []int{0, 10}, 10},
		{"no cover", Config{NoCover: true}, []int{}, 0},
	} {
		tg := &optsTarget{}
		cfg := c.cfg
		cfg.Target, cfg.Seed, cfg.Programs, cfg.Weights, cfg.Workdir = tg, 4, 20, noThreads(gen.DefaultWeights()), t.TempDir()
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		sr, err := ReadStats(cfg.Workdir)
		if err != nil || len(sr.Samples) == 0 {
			t.Fatalf("%s: stats: %v", c.name, err)
		}
		last := sr.Samples[len(sr.Samples)-1]
		if got := last.CoverEvery; got != c.every {
			t.Errorf("%s: samples say coverage from one program in %d, want %d", c.name, got, c.every)
		}
		if want := map[bool]string{true: cfg.CoverRule(), false: ""}[c.every > 1]; last.CoverRule != want {
			t.Errorf("%s: samples say the rule %q, want %q", c.name, last.CoverRule, want)
		}
		if len(tg.opts) != 20 {
			t.Fatalf("%s: %d runs, want 20", c.name, len(tg.opts))
		}
		var got []int
		for i, o := range tg.opts {
			if !o.NoCover {
				got = append(got, i)
			} else if o.Symbols {
				t.Errorf("%s: program %d asks for symbols without coverage", c.name, i)
			}
		}
		want := c.covered
		if want == nil {
			for i := range 20 {
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: programs %v collected coverage, want %v", c.name, got, want)
		}
		if !tg.opts[0].NoCover && !tg.opts[0].Symbols && c.name == "guided" {
			t.Errorf("%s: the first program did not ask for the kernel's symbols", c.name)
		}
	}
}

// modeCrashTarget's executor "dies" on every run whose options crash
// says so (without coverage, without the census): a failure that shows
// only as the run that found it ran. survived counts the other runs.
type modeCrashTarget struct {
	modelTarget
	crash          func(agents.Options) bool
	runs, survived atomic.Int64
}

func (c *modeCrashTarget) Parallel() int { return 1 }
func (c *modeCrashTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	c.runs.Add(1)
	if !c.crash(opt) {
		c.survived.Add(1)
		return checker.Expected(p), nil
	}
	return nil, &executor.CrashError{Status: "signal: segmentation fault"}
}

// A finding of a program that ran without the page census (three
// programs in four) is minimized and replayed without it, and its report
// and replay command say so.
func TestFindingKeepsNoCensus(t *testing.T) {
	tg := &modeCrashTarget{crash: func(o agents.Options) bool { return o.NoForkPages }}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 4, Programs: 3, Weights: noThreads(gen.DefaultWeights()),
		MinimizeRuns: 20, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := st.First
	if f == nil || f.Index != 1 || !f.NoCensus {
		t.Fatalf("first finding %+v, want program 1's, without the census", f)
	}
	if f.NotRepeated || f.Reproduced != f.Replays || f.Replays == 0 {
		t.Fatalf("not repeated %v, reproduced %d/%d: minimization or replays took the census", f.NotRepeated, f.Reproduced, f.Replays)
	}
	if n := tg.survived.Load(); n != 1 {
		t.Fatalf("%d of %d runs took the census, want 1 (program 0)", n, tg.runs.Load())
	}
	if r := f.Report(); !strings.Contains(r, "census:   no page census at forks in the run that showed it") {
		t.Fatalf("report:\n%s", r)
	}
	if r := f.Replay(); !strings.Contains(r, " --no-census ") {
		t.Fatalf("replay command %q does not switch the census off", r)
	}
}

// A finding of a program that ran without coverage is minimized and
// replayed without coverage too, and its report says so.
func TestFindingKeepsNoCover(t *testing.T) {
	tg := &modeCrashTarget{crash: func(o agents.Options) bool { return o.NoCover }}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 4, Programs: 3, Blind: true, Weights: noThreads(gen.DefaultWeights()),
		MinimizeRuns: 20, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := st.First
	if f == nil || f.Index != 1 || !f.NoCover {
		t.Fatalf("first finding %+v, want program 1's, without coverage", f)
	}
	if f.NotRepeated || f.Reproduced != f.Replays || f.Replays == 0 {
		t.Fatalf("not repeated %v, reproduced %d/%d: minimization or replays ran with coverage", f.NotRepeated, f.Reproduced, f.Replays)
	}
	if n := tg.survived.Load(); n != 1 {
		t.Fatalf("%d of %d runs collected coverage, want 1 (program 0)", n, tg.runs.Load())
	}
	if r := f.Report(); !strings.Contains(r, "kcov:     off in the run that showed it") {
		t.Fatalf("report:\n%s", r)
	}
	if r := f.Replay(); !strings.Contains(r, " --no-cover ") {
		t.Fatalf("replay command %q does not switch coverage off", r)
	}
}
