package campaign

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// slowOnce is the reference model as a target on which program 5 runs
// out of time whenever it gets the target's own timeout (a slow program
// on a loaded guest), and, with always, whatever the timeout.
type slowOnce struct {
	always bool
	// vmHang: with a longer timeout the slow program hangs the VM
	// instead (a kernel that stalls the guest on some runs, the
	// executor on others).
	vmHang bool
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
	if slow && s.vmHang && opt.Timeout > 0 {
		return nil, &vm.KernelReportError{Title: "VM hang: no result within the program timeout", Kind: "hang", Console: "[ 9.1] forkfuzz: program started\n"}
	}
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

// An executor hang that comes back as a VM hang on the longer replays is
// the program hanging again: counted against the kernel, and the replay
// note says what it came back as.
func TestHangBackAsAnotherHang(t *testing.T) {
	var log bytes.Buffer
	st, err := Run(context.Background(), Config{Target: &slowOnce{vmHang: true}, Seed: 9, Programs: 12,
		Weights: noThreads(gen.DefaultWeights()), Workdir: t.TempDir(), Log: &log, MinimizeRuns: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unconfirmed) != 0 || st.Blamed() != 1 {
		t.Fatalf("unconfirmed %q, %d blamed\n%s", st.Unconfirmed, st.Blamed(), log.String())
	}
	if !strings.Contains(log.String(), "reproduced as kernel-hang/VM-hang") {
		t.Fatalf("the log does not say what the hang came back as:\n%s", log.String())
	}
}

func TestCameBack(t *testing.T) {
	const (
		exec = "executor-hang"
		vmh  = "kernel-hang/VM-hang--no-result-within-the-program-timeout"
		info = "kernel-hang/INFO--task-hung"
		bug  = "kernel-bug/BUG-in-copy_pte_range"
	)
	verdict := func(sigs ...string) *judge.Verdict {
		v := &judge.Verdict{}
		for _, s := range sigs {
			v.Issues = append(v.Issues, judge.Issue{Signature: s})
		}
		return v
	}
	for _, c := range []struct {
		sig  string
		v    *judge.Verdict
		back bool
		as   string
	}{
		{exec, verdict(exec), true, exec},
		{exec, verdict(vmh), true, vmh},
		{vmh, verdict(exec), true, exec},
		{exec, verdict(info), true, info},
		{exec, verdict(bug, vmh), true, vmh},
		{exec, verdict(bug), false, ""},
		{exec, verdict(), false, ""},
		{exec, nil, false, ""},
		{bug, verdict(exec), false, ""},              // not a hang: itself or nothing
		{info, verdict(exec), false, ""},             // the kernel's report must come back as itself
		{"executor-crash", verdict(exec), false, ""}, // a death is no hang
		{vmh, verdict("executor-crash"), false, ""},  // nor the other way round
	} {
		back, as := CameBack(c.sig, c.v)
		if back != c.back || as != c.as {
			t.Errorf("CameBack(%s, %v) = %v, %q; want %v, %q", c.sig, c.v, back, as, c.back, c.as)
		}
	}
}
