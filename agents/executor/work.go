package executor

import (
	"sync/atomic"
	"unsafe"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// workNames names the activities after the operation kinds.
var workNames = [numWork - prog.NumOpKinds]string{"view", "census", "evidence", "kcov-drain", "kcov-grow"}

// takeWork reads the counters after a run (main process, every child
// reaped): microseconds by name, counters that stayed zero left out.
func (m *machine) takeWork() map[string]int64 {
	if len(m.ctl) < workOff+numWork*8 {
		return nil
	}
	w := map[string]int64{}
	for i := 0; i < numWork; i++ {
		ns := atomic.LoadInt64((*int64)(unsafe.Pointer(&m.ctl[workOff+i*8])))
		if ns <= 0 {
			continue
		}
		name := ""
		if i < prog.NumOpKinds {
			name = prog.OpKind(i).String()
		} else {
			name = workNames[i-prog.NumOpKinds]
		}
		w[name] = ns / 1e3
	}
	return w
}
