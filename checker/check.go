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
	m.checkRollbacks() // rollback.go
	m.checkForkImpl()  // forkimpl.go
	if m.hasThreads() {
		dropped := 0
		for _, tl := range o.Threads {
			dropped += tl.Dropped
		}
		if dropped > 0 {
			// The cut search needs every store of the history: the
			// check is undecided, which is never a pass.
			m.col.add(Finding{Oracle: OracleLinUnknown, Signature: "linearizability-unknown:log-overflow", View: -1, Op: -1, Region: -1,
				Explanation: fmt.Sprintf("threads dropped %d stores from their logs (capacity exceeded): the consistent-cut oracle could not judge the child snapshots", dropped)})
		} else {
			// An undecided search (porcupine's timeout or memory cap)
			// is a finding of its own kind: never a pass.
			c := newConcurrency(p)
			m.col.v.Stats.Cells = len(judgedCells(p, c))
			for _, f := range cutFindings(p, o, c, cutTimeout) {
				m.col.add(f)
			}
		}
	}
	for vi, used := range m.usedView {
		if used || m.racyFault {
			// After the main process stopped racily (a thread changed
			// its mappings under it), children it had released may have
			// taken views the model never reached.
			continue
		}
		v := &o.Views[vi]
		why := "no process of the program takes this view"
		if v.Proc > 0 && v.Proc < len(m.procs) {
			switch {
			case m.procs[v.Proc].state == forkFailed:
				why = "the fork that would create the process failed"
			case m.procs[v.Proc].copyKilled:
				why = "the process " + m.killedHow(v.Proc-1)
			case m.killOp(v.Proc-1) >= 0:
				why = fmt.Sprintf("the process was killed by %s before it was released", opRef(p, m.killOp(v.Proc-1)))
			}
		}
		if len(m.views[viewKey{v.Proc, v.At}]) > 1 {
			why = "the view appears more than once"
		}
		m.col.add(Finding{Oracle: OracleUnexpectedView, Signature: "unexpected-view", Proc: v.Proc, View: vi, At: v.At, Op: -1, Region: -1,
			Explanation: fmt.Sprintf("the observation has a %s, but %s", viewName(v.Proc, v.At), why)})
	}
	m.judgeEvents(o) // events.go
	if o.Truncated {
		m.col.note("the observation is truncated (report buffer full): missing records are not judged")
	}
	m.col.v.Stats.SharedUnjudged = m.taintShared
	if m.taintShared {
		m.col.note("the model lost track of a write that may have reached shared memory; shared memory was not judged after that")
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

func (m *machine) errnoFinding(pr *proc, i int, pd pred, got int) {
	var want []string
	for _, e := range pd.errnos {
		want = append(want, errnoName(e))
	}
	m.col.add(Finding{Oracle: OracleErrno, Signature: "errno:" + m.opSig(i), Proc: pr.id, View: -1, Op: i, Region: m.regionOf(i),
		Explanation: fmt.Sprintf("%s: %s returned %s, expected %s: %s", procName(pr.id), opRef(m.p, i), errnoName(got), strings.Join(want, " or "), pd.why)})
}

func (m *machine) skippedFinding(pr *proc, i int, want, got int) {
	m.col.add(Finding{Oracle: OracleSkipped, Signature: "skipped:" + m.opSig(i), Proc: pr.id, View: -1, Op: i, Region: m.regionOf(i),
		Explanation: fmt.Sprintf("%s: %s skipped %d slots, expected %d: the executor skips slots whose page /proc/self/maps shows as not writable or past the end of its object; the model's mappings say %d",
			procName(pr.id), opRef(m.p, i), got, want, want)})
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
