package checker

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// The model of uffdreg and uffdunreg (fuzz/prog/vmaops.go). A handler
// answers every missing-page fault of a MISSING-registered range with
// zeros, which is what the fault would have found anyway, so content
// follows the usual rules; what changes is the VMA (its VM_UFFD_* flags
// keep it from merging with its neighbours, and fork clears them in the
// child: no UFFD_FEATURE_EVENT_FORK), and three things the model cannot
// follow page by page:
//
//   - a hole of a private file mapping (memfd, tmpfs) filled by the
//     handler is a private zero page, no longer the file's page: later
//     writes to the file do not show there. The model forgets such
//     segments when they are registered.
//   - GUP without FAULT_FLAG_ALLOW_RETRY (io_uring's buffer registration,
//     a write to /proc/self/mem on Linux 6.1) does not wait for the
//     handler: on a missing page it fails (handle_userfault answers
//     VM_FAULT_SIGBUS; newer kernels retry, 6.18 waits). Whether a page is
//     missing is beyond the model, so those operations see the range
//     forgotten (uffdNoRetry).
//   - registration rules (holes, hugetlb alignment, which mappings may
//     register) differ across kernel versions: the errno is not
//     predicted. Every check comes before the first change, so a failed
//     registration changed nothing, but ENOMEM, which may also be a VMA
//     split that failed half-way.

// seg.uffd bits.
const (
	uffdWP      uint8 = 1 << 0 // VM_UFFD_WP (uffdwp)
	uffdMissing uint8 = 1 << 1 // VM_UFFD_MISSING (uffdreg)
)

// uffdMissOp runs uffdreg or uffdunreg in the model.
func (m *machine) uffdMissOp(pr *proc, i int) {
	if m.skippedOp(pr, i) {
		return
	}
	op := &m.p.Ops[i]
	lo := gpage(op.Region, op.Off&^(prog.PageSize-1))
	hi := gpage(op.Region, 0) + pagesUp(op.Off+op.Len)
	r := m.result(pr, i, unpredictable("userfaultfd registration rules (holes, hugetlb alignment, which mappings may register) differ between kernel versions"))
	switch {
	case r.Errno == eNOMEM:
		m.forget(pr, lo, hi, i)
		return
	case r.Errno != 0:
		return
	}
	if op.Kind == prog.OpUffdUnreg {
		m.setAttr(pr, lo, hi, func(s *seg) bool { return set(&s.uffd, 0) })
		return
	}
	// UFFDIO_REGISTER replaces the mode: a WP registration is gone.
	m.setAttr(pr, lo, hi, func(s *seg) bool { return set(&s.uffd, uffdMissing) })
	for _, s := range pr.segsIn(lo, hi) {
		if s.kind == prog.MemfdPrivate && !s.huge && !s.unknown {
			m.forget(pr, s.start, s.end, i)
			m.col.note("%s registers a private file mapping: a hole there filled by the fault handler is a private zero page, not the file's, so the model stops following pages %#x-%#x of it", opRef(m.p, i), gaddr(s.start), gaddr(s.end))
		}
	}
}

// uffdNoRetry forgets the range of a uringreg, or of a procmem into the
// process itself, where it overlaps a MISSING-registered segment of pr,
// before the operation's own rule runs (see above).
func (m *machine) uffdNoRetry(pr *proc, i int) {
	op := &m.p.Ops[i]
	var lo, hi int
	switch {
	case op.Kind == prog.OpUringReg:
		lo, hi = ioPages(op)
	case op.Kind == prog.OpProcMem && op.Into == 0 && op.Count > 0:
		lo = gpage(op.Region, op.Off&^(prog.PageSize-1))
		hi = gpage(op.Region, 0) + pagesUp(op.Off+uint64(op.Count-1)*op.Stride+prog.SlotSize)
	default:
		return
	}
	for _, s := range pr.segsIn(lo, hi) {
		if s.uffd&uffdMissing != 0 && !s.unknown {
			m.forget(pr, lo, hi, i)
			m.col.note("%s reaches pages of a userfaultfd MISSING range through GUP, which on some kernels (6.1) fails on a missing page there instead of waiting for the handler, so the model stops following pages %#x-%#x", opRef(m.p, i), gaddr(lo), gaddr(hi))
			return
		}
	}
}
