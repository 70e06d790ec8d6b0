package executor

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Threads of the main process (prog "tN:" operations). They exist only in
// the main executor process, never in forked children (a child has only
// the thread that forked it), so this file may use the Go runtime freely.

// maxThreadLog bounds the stores one thread records per program.
const maxThreadLog = 1 << 21

// worker is one extra thread t1..tN: a goroutine locked to its own OS
// thread, with a private machine copy for scratch state (maps buffer,
// timespec, page), running the operations the main thread hands it.
type worker struct {
	id    int
	m     *machine
	queue chan int
	wg    sync.WaitGroup
	log   obs.ThreadLog
	used  bool
}

// threadSet is the executor's pool of workers and the storeloop stop flags.
type threadSet struct {
	workers [prog.MaxThreads + 1]*worker
	stop    [prog.MaxForks]atomic.Bool
}

func (ts *threadSet) worker(id int, main *machine) *worker {
	w := ts.workers[id]
	if w == nil {
		w = &worker{id: id, m: newMachine(main.rep, main.ctl, make([]byte, mapsBufSize)), queue: make(chan int, prog.MaxOps)}
		ts.workers[id] = w
		go w.loop()
	}
	if !w.used {
		// First use in this program: take the main machine's program state.
		maps := w.m.maps
		*w.m = *main
		w.m.maps = maps
		w.m.moved = nil
		w.log = obs.ThreadLog{Thread: id}
		w.used = true
	}
	return w
}

func (w *worker) loop() {
	runtime.LockOSThread()
	debug.SetPanicOnFault(true)
	for i := range w.queue {
		w.run(i)
		w.wg.Done()
	}
}

// post hands operation i to its thread. Main process, main thread only.
func (m *machine) post(i int) {
	w := m.th.worker(m.p.Ops[i].Thread, m)
	w.wg.Add(1)
	w.queue <- i
}

// join waits until thread id has run everything posted to it.
func (m *machine) join(id int) {
	if w := m.th.workers[id]; w != nil && w.used {
		w.wg.Wait()
	}
}

// finishThreads joins every thread and collects their logs and moved
// mappings. Main process only.
func (m *machine) finishThreads() []obs.ThreadLog {
	var logs []obs.ThreadLog
	for _, w := range m.th.workers {
		if w == nil || !w.used {
			continue
		}
		w.wg.Wait()
		logs = append(logs, w.log)
		m.moved = append(m.moved, w.m.moved...)
		w.used = false
	}
	for f := range m.th.stop {
		m.th.stop[f].Store(false)
	}
	return logs
}

// run executes one thread operation, turning a memory fault (another thread
// unmapped or protected the memory meanwhile) into a result.
func (w *worker) run(i int) {
	op := &w.m.p.Ops[i]
	start := w.m.now()
	defer func() {
		if r := recover(); r != nil {
			w.m.recOp(i, uintptr(unix.EFAULT), 0, start, w.m.now(), 0)
			w.m.rec(obs.RecEvent, obs.EventThreadFault, uint64(i), uint64(w.id), 0, 0, 0)
		}
	}()
	switch op.Kind {
	case prog.OpStore:
		skipped := w.timedStores(i, op, 0, op.Count)
		w.m.recOp(i, 0, 0, start, w.m.now(), skipped)
	case prog.OpStoreLoop:
		n := 0
		for !w.m.th.stop[op.Fork].Load() && n+op.Count <= prog.MaxLoopWrites {
			w.timedStores(i, op, n, op.Count)
			n += op.Count
		}
		w.m.recOp(i, 0, uint64(n/op.Count), start, w.m.now(), 0)
	default:
		w.m.exec(i)
	}
}

// timedStores writes slots [0, count) of op with values numbered from
// base, logging each store's times. Slots on pages that /proc/self/maps
// shows unwritable when the pass starts are skipped.
func (w *worker) timedStores(i int, op *prog.Op, base, count int) int {
	m := w.m
	skipped := 0
	if m.readMaps() != 0 {
		return count
	}
	addr0 := prog.Base(op.Region) + op.Off
	for k := 0; k < count; k++ {
		a := addr0 + uint64(k)*op.Stride
		vi := m.findVMA(a)
		if vi < 0 || m.vmas[vi].prot&obs.VMAWrite == 0 || m.pageState(&m.vmas[vi], a&^pageMask) == obs.BeyondEOF {
			skipped++
			continue
		}
		v := prog.SlotValue(i, base+k)
		inv, resp := storeTimed(uintptr(a), v)
		if len(w.log.Stores) < maxThreadLog {
			w.log.Stores = append(w.log.Stores, obs.TimedStore{Op: i, Slot: base + k, Value: v, Inv: inv, Resp: resp})
		} else {
			w.log.Dropped++
		}
	}
	return skipped
}
