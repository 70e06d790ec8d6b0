package executor

import (
	"fmt"
	"os"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// A fork's hold (prog.Op.Hold; the rule is in fuzz/prog/hold.go): the
// child of a main-process fork stays off the CPU until the parent has run
// its next Hold operations. The evidence machinery (forkimpl.go) or, with
// no fork implementation, a childHold (childfail.go) pins the parent to
// its CPU and runs it SCHED_FIFO before the fork; fork() then keeps them
// in force instead of letting the child go, and runProc ends the hold.

// heldChild is the child held past its fork.
type heldChild struct {
	pid  int // 0: no hold in force
	op   int // the fork
	left int // main-thread operations still to run
	ev   bool
	h    childHold // the hold when the evidence machinery is off
	// ranAt says when the child was first seen to have run (with the
	// evidence on, probed without allocating around each held operation).
	ranAt string
}

// heldProbe notes, the first time the held child is seen to have run,
// where (when the evidence's allocation-free schedstat read is at hand).
func (m *machine) heldProbe(i int, where string) {
	if !m.held.ev || m.held.ranAt != "" || m.fe.curRan != "" {
		return
	}
	if m.fe.childRanRaw(m.held.pid) != "" {
		m.held.ranAt = fmt.Sprintf("%s %d", where, i)
	}
}

// keepHeld runs in the parent right after hold fork i returned pid: the
// child stays off the CPU (a failed fork has none: the hold ends at once).
func (m *machine) keepHeld(i, pid int, errno uintptr, ev bool) {
	switch {
	case errno == 0:
		m.held.pid, m.held.op, m.held.left, m.held.ev = pid, i, m.p.Ops[i].Hold, ev
	case ev:
		m.fe.release(pid, errno)
	default:
		m.held.h.after(0)
	}
}

// unhold lets the held child run anywhere and says how the hold went:
// how many operations it lasted, and whether the child had run before
// its end (it reads the child's schedstat: host code, past the window).
func (m *machine) unhold() {
	hc := &m.held
	h := obs.ForkHold{Fork: m.p.Ops[hc.op].Fork, Op: hc.op, Ops: m.p.Ops[hc.op].Hold - hc.left}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", hc.pid)); err != nil {
		h.Ran = "unknown: " + err.Error()
	} else if f := strings.Fields(string(st)); len(f) != 3 {
		h.Ran = "unknown: schedstat " + strings.TrimSpace(string(st))
	} else if f[2] != "0" && (hc.ranAt != "" || !hc.ev) {
		// With the evidence on, a child first seen after the last held
		// operation ran only once they were done: the hold held.
		h.Ran = "the child ran before the hold ended (schedstat " + strings.Join(f, " ") + ")"
		if hc.ranAt != "" {
			h.Ran += ", first seen " + hc.ranAt
		}
	}
	if hc.ev {
		if !m.fe.fifo {
			h.Ran = "not held: " + m.fe.pinErr + "; " + h.Ran
		}
		m.fe.release(hc.pid, 0)
	} else {
		if hc.h.err != "" {
			h.Ran = "not held: " + hc.h.err + "; " + h.Ran
		}
		hc.h.after(hc.pid)
	}
	m.holds = append(m.holds, h)
	*hc = heldChild{}
}
