package executor

import (
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Threads of the main process (prog "tN:" operations). They exist only in
// the main executor process, never in forked children (a child has only
// the thread that forked it), so this file may use the Go runtime freely.

// maxThreadLog bounds the stores one thread records per program.
const maxThreadLog = 1 << 21

// maxLoopLog bounds the stores one storeloop records: the loop ends there
// (as at prog.MaxLoopWrites), and a thread's storeloops together stop at
// half the thread's log, leaving the rest for its plain stores (a store
// beyond the log's capacity is dropped, which makes the program's
// consistent-cut judgement undecided). Without it a loop that runs until
// a late wait under TCG logs millions of stores: an executor heap whose
// collection and trimming outlast the program timeout, during which the
// executor stops answering go-plugin's keepalive (a lost connection or a
// hang with no kernel report, which replays do not reproduce;
// docs/executor.md). The stores that matter are those near a fork call,
// which come early: a loop starts right before the fork it races with.
const maxLoopLog = 1 << 18

// A storeloop stores back to back for its first loopDensePasses passes
// (the fork it races with follows at once), then pauses loopPause
// between passes: still storing through every later fork (a fork takes
// far longer), but no longer taking a whole CPU from the program's own
// thread and the executor's connection for as long as the program runs
// (docs/executor.md).
const (
	loopDensePasses = 1024
	loopPause       = 50 * time.Microsecond
)

// worker is one extra thread t1..tN: a goroutine locked to its own OS
// thread, with a private machine copy for scratch state (maps buffer,
// timespec, page), running the operations the main thread hands it.
type worker struct {
	id    int
	m     *machine
	queue chan int
	// started is signalled once a storeloop has made its first pass.
	started chan struct{}
	wg      sync.WaitGroup
	log     obs.ThreadLog
	used    bool
	// appended counts the stores logged in this program, those a
	// compaction (compactLog) dropped included: the loops' limits.
	appended int
}

// threadSet is the executor's pool of workers and the storeloop stop flags.
type threadSet struct {
	workers [prog.MaxThreads + 1]*worker
	stop    [prog.MaxForks]atomic.Bool
	// mainCPU is the CPU the main thread was on when it last handed out
	// a storeloop (-1: unknown); noSpread keeps writers where the
	// scheduler puts them (to measure the difference).
	mainCPU  atomic.Int32
	noSpread bool
	// inFork counts forks of the main process in flight (from before the
	// TSC read of their start to after their window is published in
	// win); nwin windows are published (compactLog).
	inFork atomic.Int32
	nwin   atomic.Int32
	win    [prog.MaxForks][2]atomic.Uint64
}

// forkBegins is called by the main process before a fork's first TSC
// read, forkEnds after its last, with the fork's window.
func (ts *threadSet) forkBegins() { ts.inFork.Add(1) }

func (ts *threadSet) forkEnds(inv, resp uint64) {
	if n := ts.nwin.Load(); int(n) < len(ts.win) {
		ts.win[n][0].Store(inv)
		ts.win[n][1].Store(resp)
		ts.nwin.Store(n + 1)
	}
	ts.inFork.Add(-1)
}

// clearWindows forgets the last program's fork windows.
func (ts *threadSet) clearWindows() { ts.nwin.Store(0) }

// makeRoom makes room in a full log: a compaction, then growth if the
// compaction could not run or left more than half of it.
func (w *worker) makeRoom() {
	switch {
	case !w.compactLog():
		w.log.Stores = slices.Grow(w.log.Stores, 1)
	case len(w.log.Stores) > cap(w.log.Stores)/2:
		// Mostly stores that must stay: double, or the next
		// compactions come ever sooner.
		w.log.Stores = slices.Grow(w.log.Stores, cap(w.log.Stores))
	}
}

// compactMin is the log length from which a writer compacts its log
// rather than growing it.
const compactMin = loopReserve

// compactLog drops from the writer's log, while no fork of the main
// process is in flight, the stores trimThreadLogs would drop and that no
// later fork can need: keepStores with the windows so far, keeping every
// cell's last store. A long storeloop then runs in a log of a few hundred
// entries instead of growing (and copying) one of megabytes on the
// writer's CPU. Every store in the log completed before the check of
// inFork, so a fork that starts after it has a window after all of them.
// It reports whether it compacted.
func (w *worker) compactLog() bool {
	ts := w.m.th
	if len(w.log.Stores) < compactMin || ts.inFork.Load() != 0 {
		return false
	}
	ws := make([]window, ts.nwin.Load())
	for k := range ws {
		ws[k] = window{ts.win[k][0].Load(), ts.win[k][1].Load()}
	}
	n := len(w.log.Stores)
	w.log.Stores = keepStores(w.m.p, w.log.Stores, ws, true)
	w.log.Trimmed += n - len(w.log.Stores)
	return true
}

func (ts *threadSet) worker(id int, main *machine) *worker {
	w := ts.workers[id]
	if w == nil {
		w = &worker{id: id, m: newMachine(main.rep, main.ctl, make([]byte, mapsBufSize)), queue: make(chan int, prog.MaxOps), started: make(chan struct{}, 1)}
		ts.workers[id] = w
		go w.loop()
	}
	if !w.used {
		// First use in this program: take the main machine's program state.
		maps, vmas := w.m.maps, w.m.vmas
		*w.m = *main
		w.m.maps, w.m.vmas = maps, vmas
		w.m.moved = nil
		w.m.ks = threadSlot(id)
		w.log = obs.ThreadLog{Thread: id}
		w.appended = 0
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

// post hands operation i to its thread. For a storeloop or migrateloop it
// waits until the loop's first pass is done, so the loop is running at
// whatever the main thread does next. Main process, main thread only.
func (m *machine) post(i int) {
	w := m.th.worker(m.p.Ops[i].Thread, m)
	w.wg.Add(1)
	if m.p.Ops[i].Kind.RunsUntil() {
		var cpu uint32
		if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
			m.th.mainCPU.Store(-1)
		} else {
			m.th.mainCPU.Store(int32(cpu))
		}
	}
	w.queue <- i
	if m.p.Ops[i].Kind.RunsUntil() {
		<-w.started
	}
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
		// The observation owns the log now: a worker that kept it would
		// keep it resident through the next program's forks.
		w.log, w.used = obs.ThreadLog{}, false
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
	// Coverage: on this OS thread's own kcov descriptor (kcov.go).
	w.m.kc.openThread(w.id)
	w.m.kc.threadOp(w.id, i)
	start := w.m.now()
	defer func() {
		w.m.kc.drain(w.m.ks)
		if r := recover(); r != nil {
			w.m.recOp(i, uintptr(unix.EFAULT), 0, start, w.m.now(), 0)
			w.m.rec(obs.RecEvent, obs.EventThreadFault, uint64(i), uint64(w.id), 0, 0, 0)
		}
	}()
	switch op.Kind {
	case prog.OpStore:
		skipped := w.timedStores(i, op, 0, w.writable(op))
		w.m.recOp(i, 0, 0, start, w.m.now(), skipped)
	case prog.OpStoreLoop:
		n := 0
		signal := func() {
			if n == 0 {
				w.started <- struct{}{}
			}
		}
		defer func() {
			signal() // never leave the main thread waiting, even on a fault
			if r := recover(); r != nil {
				panic(r)
			}
		}()
		// Which slots are writable is read from /proc/self/maps once: a
		// read per pass would block on mmap_lock while fork holds it, and
		// the loop must keep storing right through the fork. For the same
		// reason the log is grown and faulted in now (a page fault or an
		// mmap of the Go heap during the fork waits for fork's mmap_lock:
		// the writer stalled on its own bookkeeping, not on the program's
		// pages), and the thread moves off the CPU the forking thread is on.
		ok := w.writable(op)
		logLimit := min(w.appended+maxLoopLog, maxThreadLog/2)
		w.reserve(loopReserve)
		if !w.m.th.noSpread {
			defer w.spread()()
		}
		w.m.kc.cut(w.m.ks, 0) // the harness's reads and faults above
		for pass := 0; n == 0 || (!w.m.th.stop[op.Fork].Load() && n+op.Count <= prog.MaxLoopWrites && w.appended+op.Count <= logLimit); pass++ {
			w.timedStores(i, op, n, ok)
			w.m.kc.drainHalf(w.m.ks)
			signal()
			n += op.Count
			if pass >= loopDensePasses {
				time.Sleep(loopPause)
			}
		}
		w.m.recOp(i, 0, uint64(n/op.Count), start, w.m.now(), 0)
	case prog.OpMigrateLoop:
		once := false
		signal := func() {
			if !once {
				once = true
				w.started <- struct{}{}
			}
		}
		defer signal() // never leave the main thread waiting, even on a fault
		w.migrateLoop(i, signal)
	default:
		w.m.exec(i)
	}
}

// loopReserve is how many log entries a storeloop has room for, faulted
// in, before it starts (2.5 MiB).
const loopReserve = 1 << 16

// reserve makes room for n more log entries and touches every page of it.
func (w *worker) reserve(n int) {
	n = min(n, maxThreadLog-len(w.log.Stores))
	if n <= 0 {
		return
	}
	w.log.Stores = slices.Grow(w.log.Stores, n)
	spare := w.log.Stores[len(w.log.Stores):cap(w.log.Stores)]
	step := max(1, prog.PageSize/int(unsafe.Sizeof(obs.TimedStore{})))
	for i := 0; i < len(spare); i += step {
		spare[i] = obs.TimedStore{}
	}
}

// spread moves the calling writer thread off the CPU the main thread was
// on when it handed out the storeloop (getcpu in post), when there is
// another CPU to run on: a writer sharing the forking thread's CPU runs
// only when fork sleeps or is preempted. It returns the function that
// restores the thread's affinity.
func (w *worker) spread() func() {
	var old unix.CPUSet
	if unix.SchedGetaffinity(0, &old) != nil || old.Count() < 2 {
		return func() {}
	}
	cpu := int(w.m.th.mainCPU.Load())
	if cpu < 0 || !old.IsSet(cpu) {
		return func() {}
	}
	set := old
	set.Clear(cpu)
	if unix.SchedSetaffinity(0, &set) != nil {
		return func() {}
	}
	return func() { unix.SchedSetaffinity(0, &old) }
}

// writable reports, per slot of op, whether /proc/self/maps shows its
// page writable (and within its backing object) now.
func (w *worker) writable(op *prog.Op) []bool {
	m := w.m
	ok := make([]bool, op.Count)
	if m.readMaps() != 0 {
		return ok
	}
	addr0 := arena.RegionBase(op.Region) + op.Off
	for k := range ok {
		a := addr0 + uint64(k)*op.Stride
		vi := m.findVMA(a)
		ok[k] = vi >= 0 && m.vmas[vi].prot&obs.VMAWrite != 0 && m.pageState(&m.vmas[vi], a&^pageMask) != obs.BeyondEOF
	}
	return ok
}

// timedStores writes the writable slots of op with values numbered from
// base, logging each store's times, and returns how many it skipped.
func (w *worker) timedStores(i int, op *prog.Op, base int, writable []bool) int {
	skipped := 0
	addr0 := arena.RegionBase(op.Region) + op.Off
	for k, ok := range writable {
		if !ok {
			skipped++
			continue
		}
		v := prog.SlotValue(i, base+k)
		inv, resp := storeTimed(uintptr(addr0+uint64(k)*op.Stride), v)
		if len(w.log.Stores) < maxThreadLog {
			if len(w.log.Stores) == cap(w.log.Stores) {
				// The Go runtime's allocation and copy fault in
				// megabytes of fresh heap on this thread: the
				// harness's coverage, not the program's, and
				// enough to fill a thread's buffer
				// (docs/coverage.md). So does a compaction's.
				at := w.m.kc.mark(w.m.ks)
				w.makeRoom()
				w.m.kc.cut(w.m.ks, at)
			}
			w.log.Stores = append(w.log.Stores, obs.TimedStore{Op: i, Slot: base + k, Value: v, Inv: inv, Resp: resp})
			w.appended++
		} else {
			w.log.Dropped++
		}
		if k&15 == 15 {
			w.m.kc.drainHalf(w.m.ks)
		}
	}
	return skipped
}
