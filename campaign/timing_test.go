package campaign

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
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
