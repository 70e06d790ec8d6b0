package executor

// While an oom_memcg limit is armed (memcg.go), every page the executor
// process charges to its group fails: the fork's, as the program asks,
// and also any the Go runtime's own threads would charge. A clone for a
// new OS thread (the main thread is locked, so the runtime's template
// thread creates Ms for it, later, on its own), a heap that grows by an
// mmap, the KCOV drainer faulting in fresh pages of its sets: each fails
// with ENOMEM, and the runtime dies of it ("fatal error: newosproc",
// "runtime: out of memory"), which looks like an executor crash of the
// program's. quiesceForLimit readies the process before the limit is
// armed; disarm ends it. What it cannot rule out (a thread of the
// program's growing its store log) is caught by armedRuntimeOOM
// (limitcrash.go): a runtime that died of the limit is the harness's trouble,
// not a finding.

import (
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"
)

// Markers the executor writes on its standard error around an armed
// limit, for armedRuntimeOOM.
const (
	limitArmedMarker  = "forkfuzz executor: memory limit armed"
	limitLiftedMarker = "forkfuzz executor: memory limit lifted"
)

// stderrMark writes line on file descriptor 2, where the runtime writes
// a fatal error, so that the two keep their order (the executor's
// os.Stderr is a pipe go-plugin relays: plugin.go).
func stderrMark(line string) {
	unix.Write(2, []byte(line+"\n"))
}

// quiescence is what quiesceForLimit changed, for end.
type quiescence struct {
	on        bool
	gcPercent int
}

// quiesceForLimit settles the KCOV drainer's job, stops the garbage
// collector from starting a cycle (SetGCPercent(-1) also waits for one
// in progress to finish marking), and leaves idle OS threads for the
// runtime to take instead of creating one.
func (m *machine) quiesceForLimit() quiescence {
	if m.kc != nil {
		m.kc.settle()
	}
	q := quiescence{on: true, gcPercent: debug.SetGCPercent(-1)}
	spareThreads(runtime.GOMAXPROCS(0) + 2)
	return q
}

// end undoes quiesceForLimit (a no-op on the zero quiescence).
func (q *quiescence) end() {
	if q.on {
		debug.SetGCPercent(q.gcPercent)
		q.on = false
	}
}

// spareThreads makes sure at least n OS threads of this process are idle:
// n goroutines each lock a thread of their own at the same time (the
// runtime creates the threads that are missing), then unlock and exit,
// which leaves their threads on the runtime's idle list. The runtime
// never ends an idle thread, so after the first call this costs n
// wake-ups, not n clones.
func spareThreads(n int) {
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}
