package prog

import "fmt"

// Pinned-page and out-of-fault-path operations: the classic sources of
// fork/COW bugs, since they reach a process's pages without a user-level
// load or store (GUP, kernel-side copies, long-term pins).
//
//	procmem r off count stride [into=fN]
//	    pwrite(2) of each slot's value to /proc/self/mem, or to the memory
//	    of fork fN's child (/proc/PID/mem, FOLL_FORCE: writes through
//	    read-only private mappings by breaking COW).
//	pvwrite r off count stride [into=fN]
//	    process_vm_writev(2) of each slot into this process or into fork
//	    fN's child (no FOLL_FORCE: needs a writable mapping).
//	odirect r off len
//	    an O_DIRECT read(2) of len bytes from a scratch file whose every
//	    8-byte word k holds SlotValue(op, k), straight into the region
//	    (the pages are pinned for DMA-style I/O).
//	vmsplice r off len pipe=pN
//	    vmsplice(2) of the range into pipe pN (the pipe references the
//	    pages; nothing is copied). Pipes p0..p3 are created at program
//	    start and inherited by every child.
//	readpipe pN
//	    reads everything queued in pipe pN and reports the non-zero words.
//	uringreg r off len
//	    registers the range as io_uring fixed buffer 0 (a long-term pin),
//	    replacing an earlier registration.
//	uringread r off len
//	    an io_uring READ_FIXED of len bytes (word k = SlotValue(op, k)) into
//	    the registered buffer: the kernel writes the pinned pages directly.
//	uffdwp r off len
//	    registers the range with userfaultfd in write-protect mode and
//	    write-protects it (UFFD_FEATURE_WP_ASYNC: the kernel resolves write
//	    faults itself, so later writes proceed and nothing waits).
//
// An operation the kernel or the executor's environment cannot do (no
// io_uring, no O_DIRECT on the scratch filesystem, no WP_ASYNC) is skipped
// with the reason in its result.
const (
	// MaxPipes is the number of pipes a program can use.
	MaxPipes = 4
	// PipePages is how many pages all vmsplices into one pipe may add up
	// to: a default pipe holds 16 buffers, and more would block.
	PipePages = 16
	// MaxIOPages bounds one odirect, vmsplice or uringread.
	MaxIOPages = 16
	// MaxUringPages bounds a registered buffer.
	MaxUringPages = 256
	// MaxMigratePages bounds one migrate or migrateloop (one move_pages
	// call per pass).
	MaxMigratePages = 512
)

// ThreadablePinned reports whether a pinned operation may run on a thread of
// the main process: the writes into the process's own memory, which race
// with a fork on the main thread (the classic O_DIRECT-vs-fork bug).
func ThreadablePinned(op *Op) bool {
	switch op.Kind {
	case OpODirect:
		return true
	case OpProcMem, OpPVWrite:
		return op.Into == 0
	}
	return false
}

// DenseValue is the value a dense write (odirect, uringread) of operation
// op puts at byte offset off of its range.
func DenseValue(op int, off uint64) uint64 { return SlotValue(op, int(off/SlotSize)) }

// pinnedState carries what validation of pinned operations needs across
// the program.
type pinnedState struct {
	pipePages [MaxPipes]int
	uring     *Op // the last uringreg
}

// validatePinned checks one pinned operation. forkProc and forkAlive
// describe fork f: the process that forked it and whether its child is
// alive (forked, not yet waited for or killed) at this point.
func (p *Program) validatePinned(i int, st *pinnedState, forkProc func(f int) (proc int, alive bool)) error {
	op := &p.Ops[i]
	errf := func(format string, args ...any) error {
		return &ValidationError{Op: i, Region: -1, Msg: fmt.Sprintf(format, args...)}
	}
	if op.Kind != OpReadPipe && (op.Region < 0 || op.Region >= len(p.Regions)) {
		return errf("no region r%d", op.Region)
	}
	if op.Thread != 0 && !ThreadablePinned(op) {
		return errf("%v must run on a process's main thread (threads may run odirect, and procmem and pvwrite without into=)", op.Kind)
	}
	switch op.Kind {
	case OpUringReg, OpUringRead, OpUffdWP:
		if op.Proc != 0 {
			return errf("%v runs only in the main process (the ring or userfaultfd belongs to its mm)", op.Kind)
		}
	}
	if op.Kind.HasIORange() {
		limit := uint64(MaxIOPages)
		switch op.Kind {
		case OpUringReg:
			limit = MaxUringPages
		case OpUffdWP:
			limit = SpanPages
		}
		if msg := ioRangeError(op, limit); msg != "" {
			return errf("%s", msg)
		}
	}
	switch op.Kind {
	case OpProcMem, OpPVWrite:
		if op.Into < 0 {
			return errf("bad into=f%d", op.Into-1)
		}
		if op.Into > 0 {
			proc, alive := forkProc(op.Into - 1)
			if proc != op.Proc || !alive {
				return errf("%v into=f%d: that child must have been forked by this process and not yet waited for or killed", op.Kind, op.Into-1)
			}
		}
	case OpVmsplice, OpReadPipe:
		if op.Pipe < 0 || op.Pipe >= MaxPipes {
			return errf("pipe p%d out of range p0..p%d", op.Pipe, MaxPipes-1)
		}
		if op.Kind == OpVmsplice {
			st.pipePages[op.Pipe] += int(op.Len / PageSize)
			if st.pipePages[op.Pipe] > PipePages {
				return errf("vmsplices into p%d add up to more than %d pages (the pipe would be full)", op.Pipe, PipePages)
			}
		}
	case OpUringReg:
		st.uring = op
	case OpUringRead:
		u := st.uring
		if u == nil || u.Region != op.Region || op.Off < u.Off || op.Off+op.Len > u.Off+u.Len {
			return errf("uringread must lie inside the range of the last uringreg")
		}
	}
	return nil
}

// ioRangeError says what is wrong with the page-aligned range of an
// operation that addresses at most limit pages without changing mappings
// (HasIORange), or returns "".
func ioRangeError(op *Op, limit uint64) string {
	switch {
	case op.Off%PageSize != 0 || op.Len%PageSize != 0 || op.Len == 0:
		return fmt.Sprintf("%v needs a page-aligned off and a non-zero page-multiple len (off %#x len %#x)", op.Kind, op.Off, op.Len)
	case op.Off >= SpanBytes || op.Len > SpanBytes-op.Off:
		return fmt.Sprintf("range off %#x len %#x runs past the region span (%#x bytes)", op.Off, op.Len, SpanBytes)
	case op.Len/PageSize > limit:
		return fmt.Sprintf("%v of %d pages: at most %d", op.Kind, op.Len/PageSize, limit)
	}
	return ""
}
