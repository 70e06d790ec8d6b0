package vm

import (
	"sync"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// pace is the guest's measured speed: seconds per unit of program
// weight, averaged (exponentially) over the programs that returned a
// result. A program's timeout scales with its weight and this pace, so
// a heavy program on a slow (TCG, loaded) guest is not called a hang for
// being slow; the configured ProgramTimeout stays the floor.
type pace struct {
	mu   sync.Mutex
	secs float64 // seconds per weight unit; 0 until the first result
	n    int
}

// paceAlpha weighs the newest program in the average.
const paceAlpha = 0.2

// timeoutSlack is how many times its expected duration a program may take.
const timeoutSlack = 8

// maxTimeoutScale caps a scaled timeout at this many ProgramTimeouts.
const maxTimeoutScale = 4

// programWeight is a rough measure of the work p asks of the guest: its
// operations, with forks (a page-table copy, a child to wait for) and
// the operations that loop (thread store loops, migration loops) counted
// more.
func programWeight(p *prog.Program) float64 {
	w := 1.0
	for _, op := range p.Ops {
		switch op.Kind {
		case prog.OpFork:
			w += 8
		case prog.OpStoreLoop, prog.OpMigrateLoop:
			w += 4
		default:
			w++
		}
	}
	return w
}

// record takes in a program of weight w that returned after d.
func (pc *pace) record(w float64, d time.Duration) {
	if w <= 0 || d <= 0 {
		return
	}
	s := d.Seconds() / w
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.n == 0 {
		pc.secs = s
	} else {
		pc.secs = paceAlpha*s + (1-paceAlpha)*pc.secs
	}
	pc.n++
}

// timeout is the time a program of weight w gets: base, or timeoutSlack
// times its expected duration at the measured pace if that is longer,
// at most maxTimeoutScale times base.
func (pc *pace) timeout(base time.Duration, w float64) time.Duration {
	pc.mu.Lock()
	secs := pc.secs
	pc.mu.Unlock()
	t := time.Duration(timeoutSlack * secs * w * float64(time.Second))
	return min(max(base, t), maxTimeoutScale*base)
}
