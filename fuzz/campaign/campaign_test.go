package campaign

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/obs"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
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

func TestJudge(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1\nstore r0 off=0x0\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	issues, herr := Judge(p, nil, &executor.CrashError{Status: "signal: killed"})
	if herr != nil || len(issues) != 1 || issues[0].Signature != "executor-crash" {
		t.Fatalf("crash: %v %v", issues, herr)
	}
	issues, herr = Judge(p, nil, &executor.CrashError{Hang: true})
	if herr != nil || len(issues) != 1 || issues[0].Signature != "executor-hang" {
		t.Fatalf("hang: %v %v", issues, herr)
	}
	if _, herr = Judge(p, nil, errors.New("qemu would not start")); herr == nil {
		t.Fatal("a harness error became an issue")
	}
	o := checker.Expected(p)
	if issues, herr = Judge(p, o, nil); herr != nil || len(issues) != 0 {
		t.Fatalf("the model's own prediction is judged wrong: %v %v", issues, herr)
	}
	o.Views[0].Words = nil // the child lost the pre-fork store
	o.Views[0].Pages = nil
	issues, _ = Judge(p, o, nil)
	if len(issues) == 0 || !strings.HasPrefix(issues[0].Signature, issues[0].Oracle+":") {
		t.Fatalf("a lost store is not flagged with a signature naming its oracle: %+v", issues)
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
func (m *modelTarget) Run(p *prog.Program, _ executor.Options) (*obs.Observation, error) {
	m.runs.Add(1)
	return checker.Expected(p), nil
}

func TestParallelCampaign(t *testing.T) {
	tg := &modelTarget{}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 9, Programs: 60, Weights: gen.DefaultWeights(), Workdir: t.TempDir()})
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
