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
// (docs/throughput.md). After each fork the main thread switches
// collection to its other buffer (two ioctls) and a drainer goroutine
// drains the full one on another CPU while the program goes on: the
// parent's next operations, or its wait for the child, run meanwhile.
// Any other drain of slot 0, a fork and the program's result first wait
// for it (settle), so the cache and sets of slot 0 have one writer at a
// time and a child never inherits them half-written.

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

// swapDrain hands slot 0's full buffer to the drainer and collects into
// the other one. Main thread only (KCOV_DISABLE and KCOV_ENABLE must come
// from the task that collects). Falls back to a synchronous drain when
// the other buffer cannot be enabled.
func (k *kcovState) swapDrain() {
	a := k.async
	k.settle()
	full := k.area[0]
	if atomic.LoadUint64(&full[0]) == 0 {
		return
	}
	next := 1 - a.cur
	atomic.StoreUint64(&a.area[next][0], 0)
	unix.RawSyscall(unix.SYS_IOCTL, uintptr(a.fd[a.cur]), kcovDisable, 0)
	if _, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(a.fd[next]), kcovEnable, kcovTracePC); e != 0 {
		unix.RawSyscall(unix.SYS_IOCTL, uintptr(a.fd[a.cur]), kcovEnable, kcovTracePC)
		k.async = nil // from now on synchronous, as before
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
