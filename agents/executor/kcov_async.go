package executor

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The main process's second KCOV buffer. A fork of the main process
// records about a million PCs (the copy of the executor's page tables),
// and draining them took a tenth of a program under TCG
// (docs/throughput.md). Where the main process drained its buffer (after
// every operation, around forks), it now switches collection to its
// other buffer (two ioctls) and a drainer goroutine drains the full one
// on another CPU while the program goes on; while the drainer is busy,
// the main process leaves its buffer be until it is half full (then it
// waits). The drainer alone writes slot 0's cache and sets; the result
// waits for it (settle); a forked child empties its copy of the cache
// (forgetCache), which the drainer may have been writing. Callers that
// drop the harness's PCs after a drain cut to a mark taken after it, not
// to zero: the program's PCs may still be in the buffer.

// asyncDrain is slot 0's second buffer and the drainer's state.
type asyncDrain struct {
	fd       [2]int
	area     [2][]uint64
	cur      int // the buffer collecting now (k.fd[0], k.area[0])
	inflight bool
	req      chan drainJob
	done     chan struct{}
	// busy is the drainer's time, summed (nanoseconds): the work moved
	// off the main thread.
	busy atomic.Int64
}

type drainJob struct {
	a  []uint64
	op int
}

// openAsync maps slot 0's second buffer and starts the drainer. Without
// it (an error, or off) every drain of slot 0 stays synchronous.
func (k *kcovState) openAsync() error {
	fd, err := unix.Open(KcovPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), kcovInitTrace, kcovMainWords); e != 0 {
		unix.Close(fd)
		return fmt.Errorf("KCOV_INIT_TRACE: %w", e)
	}
	b, err := unix.Mmap(fd, 0, kcovMainWords*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return err
	}
	if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(b)
		unix.Close(fd)
		return err
	}
	a := &asyncDrain{req: make(chan drainJob), done: make(chan struct{})}
	a.fd = [2]int{k.fd[0], fd}
	a.area = [2][]uint64{k.area[0], words64(b)}
	k.async = a
	go k.drainer()
	return nil
}

func (k *kcovState) drainer() {
	a := k.async
	for j := range a.req {
		t := time.Now()
		k.drainBufAt(0, j.a, j.op)
		a.busy.Add(int64(time.Since(t)))
		a.done <- struct{}{}
	}
}

// settle waits for the drainer's job; the main thread's wait counts as
// drain time (k.work).
func (k *kcovState) settle() {
	a := k.async
	if a == nil || !a.inflight {
		return
	}
	t := time.Now()
	<-a.done
	a.inflight = false
	if k.work != nil {
		atomic.AddInt64(k.work, int64(time.Since(t)))
	}
}

// deferDrain is drain of slot 0: the buffer goes to the drainer, or stays
// while the drainer is busy and it is less than half full. It reports
// false when the caller must drain synchronously (no second buffer,
// Options.SyncKcovDrain), after any job in flight has finished.
func (k *kcovState) deferDrain() bool {
	a := k.async
	if a == nil || k.syncDrain || !k.ok || !k.on {
		k.settle()
		return false
	}
	n := atomic.LoadUint64(&k.area[0][0])
	if n == 0 {
		return true
	}
	if a.inflight {
		if n < uint64(len(k.area[0]))/2 {
			return true
		}
		k.settle()
	}
	k.swapDrain()
	return true
}

// drainNow drains slot 0 on the main thread after the drainer's job:
// the program's last PCs, before its result.
func (k *kcovState) drainNow() {
	sync := k.syncDrain
	k.syncDrain = true
	k.drain(0)
	k.syncDrain = sync
}

// swapDrain hands slot 0's full buffer to the drainer and collects into
// the other one. Main thread only (KCOV_DISABLE and KCOV_ENABLE must come
// from the task that collects). Falls back to a synchronous drain when
// the other buffer cannot be enabled.
func (k *kcovState) swapDrain() {
	a := k.async
	k.settle()
	full := k.area[0]
	next := 1 - a.cur
	atomic.StoreUint64(&a.area[next][0], 0)
	unix.RawSyscall(unix.SYS_IOCTL, uintptr(a.fd[a.cur]), kcovDisable, 0)
	if _, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(a.fd[next]), kcovEnable, kcovTracePC); e != 0 {
		unix.RawSyscall(unix.SYS_IOCTL, uintptr(a.fd[a.cur]), kcovEnable, kcovTracePC)
		k.closeAsync() // from now on synchronous, as before
		k.asyncNote = fmt.Sprintf("main KCOV buffer drained synchronously from here on (KCOV_ENABLE of the second buffer: %v); ", e)
		k.drain(0)
		return
	}
	a.cur = next
	k.fd[0], k.area[0] = a.fd[next], a.area[next]
	a.inflight = true
	a.req <- drainJob{full, k.op}
}

// closeAsync stops the drainer and unmaps the buffer slot 0 is not
// using (close releases the other).
func (k *kcovState) closeAsync() {
	a := k.async
	if a == nil {
		return
	}
	k.settle()
	close(a.req)
	other := 1 - a.cur
	unix.Munmap(unsafeBytes(a.area[other]))
	unix.Close(a.fd[other])
	k.async = nil
}
