package executor

// Kernel coverage (KCOV) of a program's processes.
//
// KCOV is per task: a task enables collection on a kcov file descriptor
// with KCOV_ENABLE and from then on the kernel appends the PC of every
// basic block it runs on that task's behalf (KCOV_TRACE_PC) to a buffer
// shared with user space. A forked child starts with KCOV off (kcov_task_init
// in copy_process) and cannot enable the parent's descriptor (it is busy),
// so the main process opens one descriptor per process before the program
// starts: slot 0 for itself (enabled once on the executor's locked OS
// thread, reset before every program), slot f+1 for the child of fork fF.
// A child inherits every descriptor and the shared buffers (the kcov
// mapping's pages are inserted at mmap time and copied into the child's
// page tables at fork), enables its own slot with one raw ioctl, and never
// touches the others. The kernel disables a child's slot when the child
// exits (kcov_task_exit), so slots are reused by the next program.
//
// The main process drains its buffer after every operation (a fork of the
// executor's address space alone fills tens of thousands of entries) into
// fixed-size sets of PCs and edges (hashed pairs of consecutive PCs, like
// syzkaller's signal); children's buffers are drained when the program
// ends. Children run without the Go runtime, so everything a child does
// here is a raw ioctl on a descriptor that already exists.
//
// Threads t1..tN of the main process (threads.go) are tasks too: each
// worker opens, maps (MADV_DONTFORK) and enables a descriptor of its own
// on its locked OS thread the first time it runs (openThread), in slot
// threadSlot(N), and drains it after each of its operations and as its
// loops go. What a thread records is the program's too: the faults of a
// storeloop racing a fork, the page moves of a migrateloop.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/ksyms"
)

// KCOV ioctls and modes (include/uapi/linux/kcov.h).
const (
	kcovInitTrace = 0x80086301 // _IOR('c', 1, unsigned long)
	kcovEnable    = 0x6364     // _IO('c', 100)
	kcovDisable   = 0x6365     // _IO('c', 101)
	kcovTracePC   = 0
)

// KcovPath is the KCOV control file (debugfs).
const KcovPath = "/sys/kernel/debug/kcov"

// Buffer sizes in entries (8 bytes each; entry 0 is the count).
const (
	kcovMainWords  = 1 << 22 // drained after every operation; one fork of the executor takes ~1M
	kcovChildWords = 1 << 16 // drained after every operation of the child, and as loops over pages go
	// Where Options.ChildKcovGrow asks for it (by default it does not:
	// kcov_grow.go), a child grows its buffer (grow) before an operation
	// that one system call makes long: to kcovGrownWords before a migrate,
	// munmap, mremap, madvise, mlock or mprotect of kcovBigOp bytes or
	// more, an operation on a region that may hold THP (one COW fault
	// of a huge page copies 512 pages), or after its buffer filled; to
	// kcovForkWords before a fork (it copies the page tables of the
	// whole executor the child inherited, as the main process's forks
	// do; docs/executor.md).
	kcovGrownWords = 1 << 20
	kcovForkWords  = kcovMainWords
	kcovBigOp      = 64 << 12
	// kcovChildren bounds the children that collect coverage (forks
	// f0..f(kcovChildren-1)); later forks run without. Children's buffers
	// are mapped in every child (fork copies their page table entries, so
	// they cost every fork); the main one is MADV_DONTFORK.
	kcovChildren = 8
	// kcovCache is the size of the per-process cache of edges drained
	// recently: loops (a fork's copy of every PTE) repeat a few edges
	// hundreds of thousands of times.
	kcovCache = 1 << 13
	// Sets of PCs and edges: open addressing over a power of two of
	// slots, after one count word. The main process's are on the heap;
	// each child's are in a shared mapping the main process merges.
	kcovMainPCs    = 1 << 16
	kcovMainEdges  = 1 << 17
	kcovChildPCs   = 1 << 14
	kcovChildEdges = 1 << 15
	// Threads' buffers and sets (slots threadSlot(1..prog.MaxThreads)):
	// a migrateloop's pass moves a whole region in one call.
	kcovThreadWords = 1 << 20
	kcovThreadPCs   = 1 << 14
	kcovThreadEdges = 1 << 15
	// kcovSlots: slot 0 the main thread, 1..kcovChildren the children,
	// then one per thread.
	kcovSlots = 1 + kcovChildren + prog.MaxThreads
)

// threadSlot is the slot of thread t (1..prog.MaxThreads).
func threadSlot(t int) int { return kcovChildren + t }

// kcovState is the executor's KCOV state, allocated once. Children read
// fd, area, pcs and edges and write only into memory shared with the main
// process (their own kcov buffer and sets).
type kcovState struct {
	ok      bool   // KCOV works
	reason  string // why not, when !ok
	enabled bool   // slot 0 is enabled on the executor thread
	on      bool   // collecting for the current program
	fd      [kcovSlots]int
	area    [kcovSlots][]uint64 // shared with the kernel
	pcs     [kcovSlots][]uint64 // sets: [0] count, then slots (0 = empty)
	edges   [kcovSlots][]uint64
	cache   [kcovCache]uint64 // cacheKey of (prev, pc) pairs drained; private to each process
	// tcache is each thread's cache (threads drain concurrently);
	// tcache[t-1] for thread t, allocated by openThread.
	tcache [prog.MaxThreads]*[kcovCache]uint64
	// tnote[t-1] says why thread t has no coverage (openThread failed).
	// hot[i] (main thread and threads): the functions that filled slot
	// i's buffer, for the note (hotSpot).
	hot    [kcovSlots]string
	tnote  [prog.MaxThreads]string
	tnoted [prog.MaxThreads]bool
	// live[i] (thread slots): the thread ran in the current program.
	// Set by the thread, cleared by begin; read by result after the
	// threads were joined.
	live   [kcovSlots]bool
	shared []byte
	// grown[i]: slot i's child replaced its buffer (grow) with the
	// first kcovGrownWords of big[i] (1) or the kcovForkWords after
	// them (2), collected through grownFd[i]. big is reserved
	// (PROT_NONE, nothing to copy at fork) in the main process so that
	// a child writes no pointer when it grows: it maps a buffer of its
	// own over part of big[i] and sets the numbers.
	// overWord[i] (shared, children only): [0] 2 + the op during which
	// slot i's buffer first filled (1: before the child's first op);
	// [1] 2 + the op before which the child grew its buffer.
	// Threads' overWord is on the heap ([1] unused).
	overWord [kcovSlots][]uint64
	grown    [kcovSlots]int
	grownFd  [kcovSlots]int
	big      [kcovSlots][]uint64
	reserve  []byte
	pathZ    [len(KcovPath) + 1]byte // KcovPath, NUL-terminated, for a child's open
	// op is the main process's operation running (-1: before the
	// first, len(ops): after the last); overAt is the op during which
	// slot 0's buffer first filled (-2: it did not), for the note.
	op, overAt int
	// top[t-1] is the operation thread t runs (written by the thread).
	top [prog.MaxThreads]int
	// forkFull says which fork alone filled slot 0, and the executor's
	// size then (for the note).
	forkFull string
	// work is the shared counter drains add their time to (child_spent.go;
	// nil: not counted); ts is each slot's clock scratch.
	work *int64
	ts   [kcovSlots][2]int64
	// async is slot 0's second buffer and its drainer (kcov_async.go;
	// nil: drains are synchronous); syncDrain keeps them synchronous for
	// the current program (Options.SyncKcovDrain, for measuring).
	async     *asyncDrain
	syncDrain bool
	asyncNote string // why there is no second buffer, until a result said it
	// grow is the current program's policy for children's bigger
	// buffers (Options.ChildKcovGrow).
	growPolicy childGrow
}

// openKcov opens and maps every slot. Main process, executor thread only.
// On a kernel without KCOV it returns a state that says why.
func openKcov() *kcovState {
	k := &kcovState{}
	for i := range k.fd {
		k.fd[i] = -1
	}
	for i := 0; i <= kcovChildren; i++ {
		words := kcovChildWords
		if i == 0 {
			words = kcovMainWords
		}
		fd, err := unix.Open(KcovPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			k.close()
			k.reason = fmt.Sprintf("open %s: %v", KcovPath, err)
			if os.IsNotExist(err) {
				k.reason = "no KCOV (" + k.reason + ")"
			}
			return k
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), kcovInitTrace, uintptr(words)); e != 0 {
			unix.Close(fd)
			k.close()
			k.reason = fmt.Sprintf("KCOV_INIT_TRACE: %v", e)
			return k
		}
		b, err := unix.Mmap(fd, 0, words*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			k.close()
			k.reason = fmt.Sprintf("mmap kcov: %v", err)
			return k
		}
		if i == 0 {
			if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
				unix.Close(fd)
				k.close()
				k.reason = fmt.Sprintf("madvise kcov: %v", err)
				return k
			}
		}
		k.fd[i] = fd
		k.area[i] = words64(b)
	}
	per := (kcovChildPCs + 1 + kcovChildEdges + 1 + 2) * 8
	b, err := unix.Mmap(-1, 0, kcovChildren*per, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		k.close()
		k.reason = fmt.Sprintf("map kcov sets: %v", err)
		return k
	}
	k.shared = b
	perBig := (kcovGrownWords + kcovForkWords) * 8
	r, err := unix.Mmap(-1, 0, kcovChildren*perBig, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		k.close()
		k.reason = fmt.Sprintf("reserve grown kcov buffers: %v", err)
		return k
	}
	k.reserve = r
	for c := 0; c < kcovChildren; c++ {
		k.big[c+1] = words64(r[c*perBig : (c+1)*perBig])
	}
	copy(k.pathZ[:], KcovPath)
	k.pcs[0] = make([]uint64, kcovMainPCs+1)
	k.edges[0] = make([]uint64, kcovMainEdges+1)
	for c := 0; c < kcovChildren; c++ {
		w := words64(b[c*per : (c+1)*per])
		k.pcs[c+1] = w[:kcovChildPCs+1]
		k.edges[c+1] = w[kcovChildPCs+1 : len(w)-2]
		k.overWord[c+1] = w[len(w)-2:]
	}
	k.ok = true
	if err := k.openAsync(); err != nil {
		// Drains stay synchronous, as before the second buffer; the
		// first result says so.
		k.asyncNote = fmt.Sprintf("main KCOV buffer drained synchronously (no second buffer: %v); ", err)
	}
	return k
}

func unsafeBytes(w []uint64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8) }

func words64(b []byte) []uint64 { return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8) }

func (k *kcovState) close() {
	k.closeAsync()
	for i := range k.fd {
		if k.fd[i] >= 0 {
			unix.Close(k.fd[i])
			k.fd[i] = -1
		}
		if k.area[i] != nil {
			unix.Munmap(unsafe.Slice((*byte)(unsafe.Pointer(&k.area[i][0])), len(k.area[i])*8))
			k.area[i] = nil
		}
	}
	if k.shared != nil {
		unix.Munmap(k.shared)
		k.shared = nil
	}
	if k.reserve != nil {
		unix.Munmap(k.reserve)
		k.reserve = nil
	}
	k.ok = false
}

// begin prepares collection for a program with the given number of
// forks. Executor thread only: it enables slot 0 on this thread, which
// stays enabled until result has drained it.
func (k *kcovState) begin(forks int, off, syncDrain bool) {
	if k == nil || !k.ok {
		return
	}
	k.settle()
	k.syncDrain = syncDrain
	k.on = !off
	if off {
		if k.enabled {
			unix.RawSyscall(unix.SYS_IOCTL, uintptr(k.fd[0]), kcovDisable, 0)
			k.enabled = false
		}
		return
	}
	if !k.enabled {
		if _, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(k.fd[0]), kcovEnable, kcovTracePC); e != 0 {
			k.reason = fmt.Sprintf("KCOV_ENABLE: %v", e)
			k.close()
			return
		}
		k.enabled = true
	}
	for i := range k.area {
		if i <= forks && i <= kcovChildren || isThread(i) && k.area[i] != nil {
			clear(k.pcs[i])
			clear(k.edges[i])
			clear(k.overWord[i])
			atomic.StoreUint64(&k.area[i][0], 0)
			k.live[i] = false
			k.hot[i] = ""
		}
	}
	atomic.StoreUint64(&k.area[0][0], 0)
	clear(k.cache[:])
	k.op, k.overAt = -1, -2
	k.forkFull = ""
	k.hot[0] = ""
}

// openThread gives the calling thread t (a worker locked to its OS
// thread, threads.go) a descriptor, buffer and sets of its own, and
// enables collection on it. Once per worker; on failure the thread runs
// without coverage and the result says so.
func (k *kcovState) openThread(t int) {
	i := threadSlot(t)
	if k == nil || !k.ok || t < 1 || t > prog.MaxThreads || k.area[i] != nil || k.tnote[t-1] != "" {
		return // opened, or failed once (said in the note): not again
	}
	fail := func(what string, err error) {
		k.overWord[i] = []uint64{0, 0}
		k.tnote[t-1] = fmt.Sprintf("%s: %v", what, err)
	}
	fd, err := unix.Open(KcovPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("open "+KcovPath, err)
		return
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), kcovInitTrace, kcovThreadWords); e != 0 {
		unix.Close(fd)
		fail("KCOV_INIT_TRACE", e)
		return
	}
	b, err := unix.Mmap(fd, 0, kcovThreadWords*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		fail("mmap kcov", err)
		return
	}
	if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(b)
		unix.Close(fd)
		fail("madvise kcov", err)
		return
	}
	if _, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), kcovEnable, kcovTracePC); e != 0 {
		unix.Munmap(b)
		unix.Close(fd)
		fail("KCOV_ENABLE", e)
		return
	}
	k.pcs[i] = make([]uint64, kcovThreadPCs+1)
	k.edges[i] = make([]uint64, kcovThreadEdges+1)
	k.overWord[i] = []uint64{0, 0}
	k.tcache[t-1] = new([kcovCache]uint64)
	k.fd[i] = fd
	k.area[i] = words64(b)
}

// threadOp starts thread t's operation op: what the thread recorded
// while idle (the Go scheduler's futex waits) is dropped. Thread t only.
func (k *kcovState) threadOp(t, op int) {
	i := threadSlot(t)
	if k == nil || !k.ok || !k.on || t < 1 || t > prog.MaxThreads || k.area[i] == nil {
		return
	}
	k.top[t-1] = op
	k.live[i] = true
	atomic.StoreUint64(&k.area[i][0], 0)
}

// atFDCWD is unix.AT_FDCWD (-100) as a system call argument.
const atFDCWD = ^uintptr(99)

// forkFilled notes, when the main process's fork f recorded n PCs and
// that filled the buffer, how big the executor was: a fork's PCs grow
// with the page tables it copies.
func (k *kcovState) forkFilled(f int, n uint64) {
	if k == nil || !k.ok || !k.on || k.forkFull != "" || n < uint64(len(k.area[0])-1) {
		return
	}
	all, _ := processVMAs()
	k.forkFull = fmt.Sprintf("fork f%d alone filled it: %d VMAs, %s", f, all, statm())
}

// statm returns the process's size and resident memory from
// /proc/self/statm.
func statm() string {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return "statm: " + err.Error()
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return "statm: " + string(b)
	}
	size, _ := strconv.ParseUint(f[0], 10, 64)
	rss, _ := strconv.ParseUint(f[1], 10, 64)
	return fmt.Sprintf("%d MiB mapped, %d MiB resident", size*4096>>20, rss*4096>>20)
}

// result drains what is left and returns the program's coverage. Main
// process only, after the program ran.
func (k *kcovState) result(forks int) (c *obs.Coverage) {
	if k == nil || !k.ok {
		reason := "no KCOV"
		if k != nil && k.reason != "" {
			reason = k.reason
		}
		return &obs.Coverage{Unavailable: reason}
	}
	if !k.on {
		return &obs.Coverage{Unavailable: "off (asked not to collect)"}
	}
	k.drainNow() // after the drainer's last job (kcov_async.go)
	// Nothing this thread does from here to the next program's begin is
	// a program's (the finish, the teardown's unmapping of the regions,
	// the next heap trim and set-up): begin threw its recording away.
	// begin enables again.
	if k.enabled {
		unix.RawSyscall(unix.SYS_IOCTL, uintptr(k.fd[0]), kcovDisable, 0)
		k.enabled = false
	}
	c = &obs.Coverage{Note: k.asyncNote}
	k.asyncNote = ""
	// Every process's sets into two slices, then sorted and compacted
	// (no maps: docs/throughput.md, BenchmarkKcovResult).
	pcs := make([]uint64, 0, 1<<12)
	edges := make([]uint32, 0, 1<<13)
	for i := range k.area {
		if !isThread(i) && i > forks {
			continue
		}
		if isThread(i) {
			t := i - kcovChildren
			if k.tnote[t-1] != "" && !k.tnoted[t-1] {
				// Said once per executor: the thread has no slot.
				k.tnoted[t-1] = true
				c.Note += fmt.Sprintf("thread %d: no coverage (%s); ", t, k.tnote[t-1])
			}
			if !k.live[i] || k.pcs[i] == nil || k.pcs[i][0] == 0 {
				continue
			}
			c.Threads++
		} else {
			if k.pcs[i][0] == 0 {
				continue
			}
			c.Procs++
		}
		if w := k.pcs[i][0]; w&(1<<63) != 0 {
			c.Overflow = true
			what := "a set"
			if w&(1<<62) != 0 {
				what = "the kcov buffer"
			}
			where := ""
			at := k.overAt
			if i > 0 {
				at = int(k.overWord[i][0]) - 2
			}
			if at >= -1 {
				where = fmt.Sprintf(" during op %d", at)
				if at == -1 {
					where = " before the first op"
				}
			}
			// Children only: overWord[0] is nil (reading it panics) and
			// a thread's [1] is 0.
			if i > 0 && !isThread(i) && k.overWord[i][1] != 0 {
				g := k.overWord[i][1]
				where += fmt.Sprintf(" (grown to %dM PCs at op %d)", g>>32>>20, int(g&(1<<32-1))-2)
			}
			if i == 0 && k.forkFull != "" {
				where += " (" + k.forkFull + ")"
			}
			if k.hot[i] != "" {
				where += " (" + k.hot[i] + ")"
			}
			who := fmt.Sprintf("process %d", i)
			if isThread(i) {
				who = fmt.Sprintf("thread %d", i-kcovChildren)
			}
			c.Note += fmt.Sprintf("%s: %s filled%s; ", who, what, where)
		}
		for _, pc := range k.pcs[i][1:] {
			if pc != 0 {
				pcs = append(pcs, pc)
			}
		}
		for _, e := range k.edges[i][1:] {
			if e != 0 {
				edges = append(edges, uint32(e>>32)^uint32(e))
			}
		}
	}
	slices.Sort(pcs)
	c.PCs = slices.Clip(slices.Compact(pcs))
	c.Edges = slices.Clip(slices.Compact(radixSort32(edges)))
	return c
}

// radixSort32 sorts a in two passes of 16 bits (a program's folded edges
// are tens of thousands: a comparison sort was most of result's time) and
// returns the sorted slice (a or its scratch copy).
func radixSort32(a []uint32) []uint32 {
	if len(a) < 256 {
		slices.Sort(a)
		return a
	}
	tmp := make([]uint32, len(a))
	var count [1 << 16]int
	for shift := uint(0); shift < 32; shift += 16 {
		clear(count[:])
		for _, v := range a {
			count[v>>shift&0xffff]++
		}
		sum := 0
		for i, n := range count {
			count[i] = sum
			sum += n
		}
		for _, v := range a {
			d := v >> shift & 0xffff
			tmp[count[d]] = v
			count[d]++
		}
		a, tmp = tmp, a
	}
	return a
}

// textSymbols returns the text symbols of /proc/kallsyms ("" when it is
// unreadable or hides addresses). Main process only.
func textSymbols() string {
	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		return ""
	}
	var out strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || (f[1] != "t" && f[1] != "T") || strings.Trim(f[0], "0") == "" {
			continue
		}
		out.WriteString(f[0] + " " + f[1] + " " + f[2] + "\n")
	}
	return out.String()
}

// kallsyms is the kernel's text symbols, read once (hotSpot).
var kallsyms struct {
	once sync.Once
	syms *ksyms.Symbols
}

// hotSpot names the functions holding most of a full buffer's PCs
// ("mostly in f 61%, g 20%"): a buffer that fills in one operation is a
// loop in the kernel (a fork copying page tables, a lock spinning).
func hotSpot(ents []uint64) string {
	kallsyms.once.Do(func() {
		kallsyms.syms, _ = ksyms.Parse("/proc/kallsyms", strings.NewReader(textSymbols()))
	})
	if h := kallsyms.syms.HotSpot(ents, 3); h != "" {
		return "mostly in " + h
	}
	return ""
}
