package executor

// KCOV as forked children use it (doc.go, kcov.go): enabling a child's
// slot, growing its buffer, draining it into the shared sets. The main
// process and its threads use the same drain.

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// childSlot is the slot of the child of fork f (-1: none, it runs
// without coverage).
//
//forkfuzz:childsafe
func childSlot(f int) int {
	if f < 0 || f >= kcovChildren {
		return -1
	}
	return f + 1
}

// isThread reports whether slot i is a thread's.
//
//forkfuzz:childsafe
func isThread(i int) bool { return i > kcovChildren }

// enableChild turns collection on for the calling child of fork f. Safe
// in a forked child: one raw ioctl.
//
//forkfuzz:childsafe
func (k *kcovState) enableChild(f int) {
	if k == nil || !k.ok || !k.on || childSlot(f) < 0 {
		return
	}
	sys3(unix.SYS_IOCTL, uintptr(k.fd[childSlot(f)]), kcovEnable, kcovTracePC)
}

// disableChild stops collection in the child that owns slot i, after its
// last drain: what the kernel does from there, the exit's teardown of the
// whole address space the child inherited (the executor's heap among it),
// is never drained: recording it was work for nothing.
//
//forkfuzz:childsafe
func (k *kcovState) disableChild(i int) {
	if k == nil || !k.ok || !k.on || i <= 0 || i > kcovChildren {
		return
	}
	cur := uintptr(k.fd[i])
	if k.grown[i] > 0 {
		cur = uintptr(k.grownFd[i])
	}
	sys3(unix.SYS_IOCTL, cur, kcovDisable, 0)
}

// buf is slot i's buffer: its own, or the one its child grew.
//
//forkfuzz:childsafe
func (k *kcovState) buf(i int) []uint64 {
	if i < 0 || i >= len(k.area) {
		return nil
	}
	switch k.grown[i] {
	case 1:
		return k.big[i][:kcovGrownWords]
	case 2:
		return k.big[i][kcovGrownWords:]
	}
	return k.area[i]
}

// grow gives the calling child of slot i a bigger buffer (kcovGrownWords
// for size 1, kcovForkWords for 2) before an operation that records more
// than its own holds in one system call: a fork (it copies the page
// tables of the whole executor the child inherited), or a migrate, munmap
// or mremap of hundreds of pages (docs/executor.md has the counts). A
// bigger buffer for every child would cost every fork (fork copies the
// page table entries of a kcov mapping); these cost only the children
// that need them. Raw system calls only: safe in a forked child. On
// failure the child goes on with the buffer it had.
//
//forkfuzz:childsafe
func (k *kcovState) grow(i, size int) {
	if k == nil || !k.ok || !k.on || i <= 0 || i > kcovChildren || k.grown[i] >= size {
		return
	}
	k.drain(i)
	words := kcovGrownWords
	b := k.big[i][:kcovGrownWords]
	if size == 2 {
		words, b = kcovForkWords, k.big[i][kcovGrownWords:]
	}
	fd, e := rawSyscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&k.pathZ[0])), unix.O_RDWR|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return
	}
	if _, e := sys3(unix.SYS_IOCTL, fd, kcovInitTrace, uintptr(words)); e != 0 {
		sys1(unix.SYS_CLOSE, fd)
		return
	}
	if _, e := sysMmap(uintptr(unsafe.Pointer(&b[0])), uintptr(words*8), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED, int(fd), 0); e != 0 {
		sys1(unix.SYS_CLOSE, fd)
		return
	}
	cur := uintptr(k.fd[i])
	if k.grown[i] > 0 {
		cur = uintptr(k.grownFd[i])
	}
	k.cut(i, 0) // what the open and mmap recorded: the harness's
	sys3(unix.SYS_IOCTL, cur, kcovDisable, 0)
	if _, e := sys3(unix.SYS_IOCTL, fd, kcovEnable, kcovTracePC); e != 0 {
		sys3(unix.SYS_IOCTL, cur, kcovEnable, kcovTracePC)
		sys1(unix.SYS_CLOSE, fd)
		return
	}
	atomic.StoreUint64(&b[0], 0)
	if k.grown[i] > 0 {
		sys1(unix.SYS_CLOSE, cur)
	}
	k.grown[i], k.grownFd[i] = size, int(fd)
	atomic.StoreUint64(&k.overWord[i][1], uint64(k.op+2)|uint64(words)<<32)
}

// drain moves slot i's buffer into slot i's sets and empties it. Safe in
// the child that owns slot i (no allocation; it writes only shared
// memory).
//
//forkfuzz:childsafe
func (k *kcovState) drain(i int) {
	if i == 0 { //forkfuzz:hostonly slot 0 is the main process's (childSlot)
		if k.deferDrain() {
			return // handed to the drainer, or left for it (kcov_async.go)
		}
	}
	a := k.slotBuf(i)
	if a == nil {
		return
	}
	if k.work == nil {
		k.drainBuf(i, a)
		return
	}
	start := monoNow(&k.ts[i])
	k.drainBuf(i, a)
	atomic.AddInt64(k.work, monoNow(&k.ts[i])-start)
}

// forgetCache empties the calling child's copy of the edge cache: the
// main process's drainer may have been writing it when the child was
// forked (kcov_async.go), and a torn entry could hide an edge.
//
//forkfuzz:childsafe
func (k *kcovState) forgetCache() {
	if k == nil {
		return
	}
	for j := range k.cache {
		k.cache[j] = 0
	}
}

// drainBuf is drain's work on slot i's buffer a.
//
//forkfuzz:childsafe
func (k *kcovState) drainBuf(i int, a []uint64) {
	op := k.op
	if isThread(i) {
		op = k.top[i-kcovChildren-1]
	}
	k.drainBufAt(i, a, op)
}

// drainBufAt is drainBuf for the buffer filled during operation op.
//
//forkfuzz:childsafe
func (k *kcovState) drainBufAt(i int, a []uint64, op int) {
	n := atomic.LoadUint64(&a[0])
	full := false
	cache := &k.cache
	if isThread(i) {
		cache = k.tcache[i-kcovChildren-1]
	}
	if n >= uint64(len(a)-1) {
		n = uint64(len(a) - 1)
		full = true
		if (i == 0 || isThread(i)) && k.hot[i] == "" { //forkfuzz:hostonly a child's slot is 1..kcovChildren (childSlot)
			// Say where the kernel spent the buffer (Go is allowed
			// here: slot 0 and threads are the main process's).
			k.hot[i] = hotSpot(a[1 : n+1])
		}
		atomic.OrUint64(&pcs0(k, i)[0], 1<<62)
		if i == 0 && k.overAt == -2 {
			k.overAt = op
		}
		if i > 0 {
			atomic.CompareAndSwapUint64(&k.overWord[i][0], 0, uint64(op+2))
		}
	}
	pcs, edges := k.pcs[i], k.edges[i]
	prev := uint64(0)
	// A (prev, pc) pair in the cache is in this process's sets, or (in a
	// child, whose cache starts as its parent's) in an ancestor's: in the
	// union either way. Loops repeat a few pairs hundreds of thousands of
	// times, so the cache test is all most entries cost: one load and
	// compare of the pair's key.
	ents := a[1 : n+1]
	for _, pc := range ents {
		key := cacheKey(prev, pc)
		c := &cache[(pc^prev>>4)&(kcovCache-1)]
		if *c == key {
			prev = pc
			continue
		}
		*c = key
		full = !setAdd(pcs, pc) || full
		full = !setAdd(edges, edgeHash(prev, pc)) || full
		prev = pc
	}
	atomic.StoreUint64(&a[0], 0)
	if full {
		// Children flag overflow in their own count word's top bit.
		atomic.OrUint64(&pcs[0], 1<<63)
	}
}

// drainHalf drains slot i when its buffer is half full: loops that fault
// on every page (a store or a view over thousands of pages) call it as
// they go, so that one operation does not overflow the buffer (a child's
// holds 64K PCs; one COW fault records a few hundred). Safe where drain
// is.
//
//forkfuzz:childsafe
func (k *kcovState) drainHalf(i int) {
	if a := k.slotBuf(i); a != nil && atomic.LoadUint64(&a[0]) >= uint64(len(a)/2) {
		k.drain(i)
	}
}

// mark returns how many PCs slot i's buffer holds: what the process
// recorded since the last drain. With cut it keeps the program's part of
// an operation and drops the harness's (see fork).
//
//forkfuzz:childsafe
func (k *kcovState) mark(i int) uint64 {
	a := k.slotBuf(i)
	if a == nil {
		return 0
	}
	return atomic.LoadUint64(&a[0])
}

// cut drops what slot i recorded after mark returned n: the executor's
// own reads around a fork (the page census reads /proc/self/smaps and
// pagemap, the evidence walks page tables, the rollback measurement digests
// memory) are not the program's coverage, and they used to fill the main
// buffer during most forks (docs/coverage.md). A buffer that filled
// before n still reports it (drain).
//
//forkfuzz:childsafe
func (k *kcovState) cut(i int, n uint64) {
	if a := k.slotBuf(i); a != nil && atomic.LoadUint64(&a[0]) > n {
		atomic.StoreUint64(&a[0], n)
	}
}

//forkfuzz:childsafe
func pcs0(k *kcovState, i int) []uint64 { return k.pcs[i] }

// slotBuf is slot i's buffer when collecting into it now (nil: not
// collecting, or no such slot: a child beyond kcovChildren, a thread
// whose openThread failed).
//
//forkfuzz:childsafe
func (k *kcovState) slotBuf(i int) []uint64 {
	if k == nil || !k.ok || !k.on {
		return nil
	}
	return k.buf(i)
}

// cacheMul makes a (prev, pc) pair one word for the drain's cache: pc ^
// prev*cacheMul. Two pairs with one key in one cache slot would hide the
// second pair's edge; kernel PCs differ in their low 24 bits, so that needs
// the products of the two prevs to agree in 40 bits, as unlikely as the
// 64-bit edge hashes the sets keep colliding.
const cacheMul = 0x9e3779b97f4a7c15

// cacheKey is the drain cache's key of the pair (prev, pc).
//
//forkfuzz:childsafe
func cacheKey(prev, pc uint64) uint64 { return pc ^ prev*cacheMul }

//forkfuzz:childsafe
func edgeHash(prev, pc uint64) uint64 {
	x := prev*0x9e3779b97f4a7c15 ^ pc
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x | 1
}

//forkfuzz:childsafe
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// setAdd adds v (non-zero) to set s ([0]: count, top bit: overflowed) and
// reports false when the set is full.
//
//forkfuzz:childsafe
func setAdd(s []uint64, v uint64) bool {
	if v == 0 {
		return true
	}
	slots := s[1:]
	mask := uint64(len(slots) - 1)
	for h := mix(v) & mask; ; h = (h + 1) & mask {
		switch slots[h] {
		case v:
			return true
		case 0:
			if s[0]&^(3<<62) >= uint64(len(slots))*3/4 {
				return false
			}
			slots[h] = v
			s[0]++
			return true
		}
	}
}

// growFor is the buffer size (grow's: 0 none, 1, 2) a child takes before
// an operation that bigOp sized size: fork says it is a fork, filled that
// the child's buffer filled before, outside a fork.
//
//forkfuzz:childsafe
func (k *kcovState) growFor(size int, fork, filled bool) int {
	if k == nil || k.growPolicy == growNone || k.growPolicy == growOps && fork {
		return 0
	}
	if size == 0 && filled {
		size = 1
	}
	return size
}

// filledAt is the operation during which child slot i's buffer first
// filled in this program (-1: before the first; -2: it did not).
//
//forkfuzz:childsafe
func (k *kcovState) filledAt(i int) int {
	if k == nil || !k.ok || i <= 0 || i > kcovChildren {
		return -2
	}
	return int(atomic.LoadUint64(&k.overWord[i][0])) - 2
}

// filledOutsideFork reports whether the calling child's buffer filled in
// an operation other than a fork: what makes its later operations grow.
//
//forkfuzz:childsafe
func (m *machine) filledOutsideFork() bool {
	at := m.kc.filledAt(m.ks)
	if at == -2 {
		return false
	}
	return at < 0 || at >= len(m.p.Ops) || m.p.Ops[at].Kind != prog.OpFork
}
