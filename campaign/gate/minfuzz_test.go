package gate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// slowRuns is a target whose every run takes d more: a TCG guest on a
// loaded host.
type slowRuns struct {
	agents.Target
	d time.Duration
}

func (s *slowRuns) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	time.Sleep(s.d)
	return s.Target.Run(p, opt)
}

// A gate whose target took most of its budget to come up, on a guest
// slow to run a program, replayed a corpus program and fuzzed nothing: it used to pass (--min-programs counts corpus
// programs too). With --min-fuzz-programs 1 (the default) it is exit 2,
// saying why; with 0 a corpus-only gate may pass.
func TestMinFuzzPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two 14 s gates")
	}
	for _, tc := range []struct {
		min      int
		wantExit int
		want     string
	}{{1, ExitError, "fewer than --min-fuzz-programs 1: the gate tested its"}, {0, ExitPass, "no new finding"}} {
		r := Run(context.Background(), Config{
			Open: func() (agents.Target, error) {
				time.Sleep(7 * time.Second) // a slow boot
				return &slowRuns{Target: simTarget(t), d: 3 * time.Second}, nil
			},
			Kernel: KernelIdentity{Target: "sim-eager"},
			Budget: 14 * time.Second, Seed: 1, Workdir: filepath.Join(t.TempDir(), "w"), MinPrograms: 1, MinFuzzPrograms: tc.min, MinimizeRuns: 5,
		})
		if r.FuzzPrograms != 0 {
			t.Fatalf("min %d: %d programs fuzzed; the test wants a gate whose boot took its fuzz share (phases %+v)", tc.min, r.FuzzPrograms, r.Phases)
		}
		if r.ExitCode != tc.wantExit || !strings.Contains(r.Reason, tc.want) {
			t.Errorf("--min-fuzz-programs %d: exit %d (%s); want %d and %q", tc.min, r.ExitCode, r.Reason, tc.wantExit, tc.want)
		}
	}
}
