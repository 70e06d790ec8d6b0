package checker

import (
	"time"

	"github.com/forkfuzz/forkfuzz/checker/cut"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// CutWitness is what the consistent-cut oracle judged for one child start
// view: the threads' timed stores to the judged cells (trimmed to those that
// can matter), the fork call's TSC bounds, what the child saw, and the
// verdict with the writes that prove a violation. Reports draw it.
type CutWitness struct {
	Fork    int
	ForkOp  int
	View    int
	History *cut.History
	Verdict cut.Verdict
	// Region maps a cell id to its region; a cell id's low 40 bits are its
	// offset in the region.
	Region map[uint64]int
}

// CutWitnesses returns the witness of every child start view the
// consistent-cut oracle judged (the general check, bounded by timeout,
// decides histories the exact one cannot).
func CutWitnesses(p *prog.Program, o *obs.Observation, timeout time.Duration) []CutWitness {
	var out []CutWitness
	fhs, _ := forkHistories(p, o, newConcurrency(p))
	for _, fh := range fhs {
		h := fh.h
		v := cut.Check(h)
		if v.Result == cut.Unknown {
			h = cut.Trim(h)
			v = cut.Decide(h, timeout)
		}
		out = append(out, CutWitness{Fork: fh.fork, ForkOp: fh.forkOp, View: fh.view, History: h, Verdict: v, Region: fh.region})
	}
	return out
}
