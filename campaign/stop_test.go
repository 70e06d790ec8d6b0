package campaign

import (
	"context"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// StopAfterFindings ends the campaign at its first finding (still
// minimized and replayed) and Stats say when it came.
func TestStopAfterFindings(t *testing.T) {
	tg, err := sim.NewTarget(sim.Config{Mode: sim.Eager, Mutant: "eager-no-wrprotect", SchedSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 1, Programs: 500, Weights: gen.DefaultWeights(),
		Workdir: t.TempDir(), StopAfterFindings: 1, MinimizeRuns: 50})
	if err != nil {
		t.Fatal(err)
	}
	if st.FirstProgram == 0 || st.First == nil || st.Findings < 1 {
		t.Fatalf("no first finding recorded: %+v", st)
	}
	if st.Programs != st.FirstProgram || st.Programs >= 500 {
		t.Errorf("ran %d programs, the first finding came at %d: want a stop right there", st.Programs, st.FirstProgram)
	}
	if st.FirstAt <= 0 || st.FirstAt > st.Elapsed {
		t.Errorf("FirstAt %v, campaign %v", st.FirstAt, st.Elapsed)
	}
	if st.First.Minimized == nil || st.First.Replays != 5 || len(st.Saved) == 0 {
		t.Errorf("first finding not minimized and replayed: %+v", st.First)
	}
	// Without the bound the campaign runs on past it.
	st2, err := Run(context.Background(), Config{Target: tg, Seed: 1, Programs: int(st.FirstProgram) + 5, Weights: gen.DefaultWeights(),
		Workdir: t.TempDir(), MinimizeRuns: 5})
	if err != nil {
		t.Fatal(err)
	}
	if st2.Programs != st.FirstProgram+5 || st2.FirstProgram != st.FirstProgram {
		t.Errorf("unbounded: %d programs, first finding at %d (bounded: %d)", st2.Programs, st2.FirstProgram, st.FirstProgram)
	}
}
