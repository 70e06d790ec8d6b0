package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// eventRule is what the checker does with one kind of harness event.
type eventRule struct {
	// oracle and sig: the finding the event is (empty: a note).
	oracle Oracle
	sig    string
}

// eventRules covers every obs.EventKind (a test holds it to that).
var eventRules = map[obs.EventKind]eventRule{
	obs.EvNote:               {},
	obs.EvMainFault:          {OracleCrash, "crash:main-process-fault"},
	obs.EvChildFault:         {},
	obs.EvThreadFault:        {},
	obs.EvViewOverrun:        {},
	obs.EvViewUnfinished:     {},
	obs.EvInjectNotApplied:   {},
	obs.EvMeasureUnavailable: {},
	obs.EvInjectedForkFail:   {},
	obs.EvInjectedCopyFail:   {},
	obs.EvPMDRWNotRestored:   {OraclePageTable, "pagetable:pmd-rw-not-restored"},
	obs.EvWriteFaultHang:     {OraclePageTable, "pagetable:write-fault-hang"},
	obs.EvPageTableError:     {OraclePageTable, "pagetable:event"},
}

// judgeEvents turns o's events into findings and notes.
func (c *comparer) judgeEvents() {
	for _, e := range c.o.Events {
		r, ok := eventRules[e.Kind]
		switch {
		case !ok:
			c.col.add(Finding{Oracle: OracleObservation, Signature: "observation:event-kind", View: -1, Op: -1, Region: -1,
				Explanation: fmt.Sprintf("the observation has an event of unknown kind %q: %s", e.Kind, e.Text)})
		case r.oracle == OracleCrash && c.m.racyFault:
			c.col.note("executor event (after a racy stop, not judged): %s", e.Text)
		case r.oracle != "":
			var expl string
			switch e.Kind {
			case obs.EvMainFault:
				expl = "the executor's main process took a fault: " + e.Text
			default:
				expl = e.Text
			}
			c.col.add(Finding{Oracle: r.oracle, Signature: r.sig, View: -1, Op: forkOpOr(c.p, e.Fork), Region: -1, Explanation: expl})
		default:
			c.col.note("%s event: %s", e.Kind, e.Text)
		}
	}
}

func forkOpOr(p *prog.Program, f int) int {
	if f < 0 || f >= p.NumForks() {
		return -1
	}
	return p.ForkOp(f)
}

// injectedExcuses says which findings an injected failure the model does
// not predict legitimately causes: the failed fork's errno and missing
// child, and, when the failure killed a child mid-copy, that child's (and
// its descendants') exit status and views. Everything else (the parent's
// content after the failure, page-table invariants) is still judged.
type injectedExcuses struct {
	ops   map[int]bool // operation indexes
	procs map[int]bool // processes of killed children and their descendants
}

func newInjectedExcuses(p *prog.Program, o *obs.Observation) *injectedExcuses {
	x := &injectedExcuses{ops: map[int]bool{}, procs: map[int]bool{}}
	for _, e := range o.Events {
		if (e.Kind != obs.EvInjectedForkFail && e.Kind != obs.EvInjectedCopyFail) || e.Fork < 0 || e.Fork >= p.NumForks() {
			continue
		}
		x.ops[p.ForkOp(e.Fork)] = true
		x.procs[e.Fork+1] = true
		for j, op := range p.Ops {
			if op.Kind == prog.OpWait && op.Fork == e.Fork {
				x.ops[j] = true
			}
		}
	}
	if len(x.procs) == 0 {
		return nil
	}
	for _, op := range p.Ops {
		if op.Kind == prog.OpFork && x.procs[op.Proc] {
			x.procs[op.Fork+1] = true
		}
	}
	return x
}

// excuses reports whether f is a consequence of an injected failure.
func (x *injectedExcuses) excuses(f *Finding) bool {
	if x == nil {
		return false
	}
	switch f.Oracle {
	case OracleErrno, OracleChildExit, OracleMissingView:
		return x.ops[f.Op] || x.procs[f.Proc]
	}
	return false
}
