package executor

// Where a program's time goes inside the executor, across every process
// of the program (obs.Observation.Work): each process adds the time of
// what it does to shared counters in the control page, so a child's
// views and drains count as well as the parent's.

import (
	"sync/atomic"
	"unsafe"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Work counters: one per operation kind (the time in its interpreter,
// whatever it includes: a fork's census and evidence, a wait's child),
// then the activities measured apart.
const (
	workView     = prog.NumOpKinds + iota // a process's view of its memory
	workCensus                            // the page census around a fork
	workEvidence                          // the fork evidence (forkimpl.go)
	workDrain                             // KCOV drains (kcov.go)
	workGrow                              // a child's switch to a bigger KCOV buffer (child_kcov.go)
	numWork
)

// workOff is where the counters start in the control page (after the
// per-fork words).
const workOff = prog.MaxForks * 64

// addWork adds the time since start (machine.now) to counter w.
//
//forkfuzz:childsafe
func (m *machine) addWork(w int, start int64) {
	if len(m.ctl) < workOff+numWork*8 {
		return
	}
	atomic.AddInt64((*int64)(unsafe.Pointer(&m.ctl[workOff+w*8])), m.now()-start)
}
