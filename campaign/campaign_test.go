package campaign

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestProgramsReplayFromSeed(t *testing.T) {
	w := gen.DefaultWeights()
	for i := int64(0); i < 20; i++ {
		a := NewProgram(7, i, nil, w).Format()
		b := NewProgram(7, i, nil, w).Format()
		if string(a) != string(b) {
			t.Fatalf("program %d differs between two generations from the same seed", i)
		}
	}
	if ProgramSeed(7, 1) == ProgramSeed(7, 2) || ProgramSeed(7, 1) == ProgramSeed(8, 1) {
		t.Fatal("program seeds collide")
	}
}

func TestDirName(t *testing.T) {
	a, b := DirName("isolation:parent-store-after-fork:anon-private"), DirName("isolation:parent-store-after-fork:anon-shared")
	if a == b || strings.ContainsAny(a, ":/ ") {
		t.Fatalf("bad directory names %q %q", a, b)
	}
}

// modelTarget answers every program with the reference model's prediction,
// from several "machines" at once.
type modelTarget struct{ runs atomic.Int64 }

func (m *modelTarget) Name() string  { return "model" }
func (m *modelTarget) Parallel() int { return 3 }
func (m *modelTarget) Close() error  { return nil }
func (m *modelTarget) Run(p *prog.Program, _ agents.Options) (*obs.Observation, error) {
	m.runs.Add(1)
	return checker.Expected(p), nil
}

func TestParallelCampaign(t *testing.T) {
	tg := &modelTarget{}
	// checker.Expected is a prediction, not a target: it has no rollback
	// measurement for a failed fork (rollback:missing) and disagrees with
	// the judge on a thread's odirect past its region's end
	// (shared:lost-store, seen with seed 9 once the every-page weights
	// came in, and with seed 5 in TestGuidedCampaign once migrate shifted
	// the generator's stream; an open question for the model). This test
	// is about the parallel machinery, so its programs have neither: no
	// fault injection, no threads (writers, racing operations on
	// threads, migrateloops).
	w := noThreads(gen.DefaultWeights())
	st, err := Run(context.Background(), Config{Target: tg, Seed: 9, Programs: 60, Weights: w, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Programs != 60 || tg.runs.Load() != 60 {
		t.Fatalf("%d programs judged, %d runs, want 60", st.Programs, tg.runs.Load())
	}
	if st.Findings != 0 {
		t.Fatalf("the model disagrees with itself: %d findings in %v", st.Findings, st.Saved)
	}
}

// noThreads returns w without fault injection or threads (see
// TestParallelCampaign).
func noThreads(w gen.Weights) gen.Weights {
	w.FailNthProb, w.ThreadProb, w.ThreadVMAProb, w.MigrateLoopProb = 0, 0, 0, 0
	return w
}
