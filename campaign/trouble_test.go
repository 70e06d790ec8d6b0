package campaign

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// slowOnce is the reference model as a target on which program 5 runs
// out of time whenever it gets the target's own timeout (a slow program
// on a loaded guest), and, with always, whatever the timeout.
type slowOnce struct {
	always bool
	mu     sync.Mutex
	n      int
	slow   string
}

func (s *slowOnce) Name() string { return "slow" }
func (s *slowOnce) Close() error { return nil }
func (s *slowOnce) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	text := string(p.Format())
	s.mu.Lock()
	s.n++
	if s.n == 5 {
		s.slow = text
	}
	slow := text == s.slow
	s.mu.Unlock()
	if slow && (s.always || opt.Timeout == 0) {
		return nil, &executor.CrashError{Hang: true, Status: "no answer within 1m0s"}
	}
	return checker.Expected(p), nil
}

// A hang is replayed with a longer timeout: a slow program is saved but
// not counted against the kernel (Stats.Unconfirmed), a real hang is.
func TestHangReplayedLonger(t *testing.T) {
	for _, always := range []bool{false, true} {
		var log bytes.Buffer
		st, err := Run(context.Background(), Config{Target: &slowOnce{always: always}, Seed: 9, Programs: 12,
			Weights: noThreads(gen.DefaultWeights()), Workdir: t.TempDir(), Log: &log, MinimizeRuns: 5})
		if err != nil {
			t.Fatal(err)
		}
		if st.Findings != 1 || st.Events != 1 {
			t.Fatalf("always=%v: %d findings, %d failing runs\n%s", always, st.Findings, st.Events, log.String())
		}
		if always != (len(st.Unconfirmed) == 0) || always != (st.Blamed() == 1) {
			t.Fatalf("always=%v: unconfirmed %q\n%s", always, st.Unconfirmed, log.String())
		}
		if !always && !strings.Contains(st.Unconfirmed[0], "executor-hang: the executor or VM ran out of time (replayed with a timeout of 1m0s), but not again on") {
			t.Fatalf("unconfirmed %q", st.Unconfirmed)
		}
	}
}
