package checker

import (
	"fmt"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// cutTimeout bounds the consistent-cut search of one child start view.
const cutTimeout = 2 * time.Second

// Check judges an observation of program p. It is a pure function: the
// verdict depends only on its arguments.
func Check(p *prog.Program, o *obs.Observation) *Verdict {
	if p == nil || o == nil {
		return &Verdict{Findings: []Finding{{Oracle: OracleObservation, Signature: "observation:missing", View: -1, Op: -1, Region: -1,
			Explanation: "no program or no observation to check"}}}
	}
	if err := p.Validate(); err != nil {
		return &Verdict{Findings: []Finding{{Oracle: OracleObservation, Signature: "observation:invalid-program", View: -1, Op: -1, Region: -1,
			Explanation: "the program is not valid: " + err.Error()}}}
	}
	if len(o.Ops) != len(p.Ops) {
		return &Verdict{Findings: []Finding{{Oracle: OracleObservation, Signature: "observation:op-count", View: -1, Op: -1, Region: -1,
			Explanation: fmt.Sprintf("the observation has %d operation results for %d operations", len(o.Ops), len(p.Ops))}}}
	}
	m := newMachine(p, o)
	m.col.excuse = newInjectedExcuses(p, o)
	m.run()
	c := m.cmp
	c.checkRollbacks() // rollback.go
	c.checkForkImpl()  // forkimpl.go
	c.threads()
	c.unmatchedViews()
	c.judgeEvents() // events.go
	if o.Truncated {
		c.col.note("the observation is truncated (report buffer full): missing records are not judged")
	}
	c.col.v.Stats.SharedUnjudged = m.taintShared
	if m.taintShared {
		c.col.note("the model lost track of a write that may have reached shared memory; shared memory was not judged after that")
	}
	return &m.col.v
}

// Expected returns the model's prediction of a clean run of p on Linux:
// every operation returns its predicted result, every view shows the
// predicted memory. Where Linux leaves a choice the model picks one:
// MADV_FREE'd pages keep their content, MADV_COLLAPSE succeeds, mremap
// moves that let the kernel choose an address go outside the arena. VMAs
// are listed one per model segment (the kernel may merge some). It
// returns nil if p is not valid.
func Expected(p *prog.Program) *obs.Observation {
	if p == nil || p.Validate() != nil {
		return nil
	}
	m := newMachine(p, nil)
	m.run()
	return m.exp
}

var errnoNames = map[int]string{
	0: "success", 1: "EPERM", 3: "ESRCH", 4: "EINTR", 10: "ECHILD", 11: "EAGAIN", 12: "ENOMEM", 13: "EACCES",
	14: "EFAULT", 16: "EBUSY", 17: "EEXIST", 22: "EINVAL", 28: "ENOSPC",
}

func errnoName(e int) string {
	if n, ok := errnoNames[e]; ok {
		if e == 0 {
			return "0 (success)"
		}
		return fmt.Sprintf("%d (%s)", e, n)
	}
	return fmt.Sprint(e)
}

func (m *machine) opSig(i int) string {
	op := &m.p.Ops[i]
	s := op.Kind.String()
	switch op.Kind {
	case prog.OpMadvise:
		s += "-" + op.Advice.String()
	case prog.OpMprotect:
		s += "-" + op.Prot.String()
	case prog.OpMremap:
		s += "-" + strings.ReplaceAll(op.Flags.String(), "|", "-")
	}
	if hasRegion(op) {
		s += ":" + m.p.Regions[op.Region].Kind.String()
	}
	return s
}

func (m *machine) regionOf(i int) int {
	op := &m.p.Ops[i]
	if hasRegion(op) {
		return op.Region
	}
	return -1
}

func hasRegion(op *prog.Op) bool {
	return op.Kind.HasRange() || op.Kind == prog.OpStore || op.Kind == prog.OpPwrite || (op.Kind.Pinned() && op.Kind != prog.OpReadPipe)
}
