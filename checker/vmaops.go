package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The model of the VMA operations of fuzz/prog/vmaops.go but remapfile
// (remapfile.go). None changes content; each changes an attribute that keeps a VMA from merging with
// its neighbours (so a later mremap across the boundary fails), and fork
// copies the policy and the name but not the lock:
//
//   - mlock2(MLOCK_ONFAULT) is mlock without the populate: VM_LOCKED and
//     VM_LOCKONFAULT on the mapped prefix, ENOMEM for a hole; a later
//     mprotect or mremap growth of the locked VMA populates nothing.
//   - mbind checks the whole range for holes before it changes anything
//     (queue_pages_range: EFAULT), then sets the policy VMA by VMA;
//     MPOL_DEFAULT accepts holes (EFAULT only when nothing is mapped).
//   - PR_SET_VMA_ANON_NAME walks the VMAs as madvise does: holes are
//     ENOMEM at the end, a file mapping stops the walk with EBADF (a
//     shared anonymous one too before Linux 6.2, which names shmem).
//   - process_madvise(MADV_COLD/PAGEOUT) of one iovec is madvise of it:
//     the same errno, and on success the iovec's length.
//
// An operation the executor skipped (the kernel lacks the feature) did
// nothing.

// eBADF is what PR_SET_VMA_ANON_NAME answers for a file mapping.
const eBADF = 9

// vmaOp runs an operation of vmaops.go in the model.
func (m *machine) vmaOp(pr *proc, i int) {
	if m.skippedOp(pr, i) {
		return
	}
	switch m.p.Ops[i].Kind {
	case prog.OpMlockOnfault:
		m.mlock(pr, i)
	case prog.OpMbind:
		m.mbind(pr, i)
	case prog.OpAnonName:
		m.anonName(pr, i)
	case prog.OpPMadvise:
		m.pmadvise(pr, i)
	case prog.OpRemapFile:
		m.remapFile(pr, i) // remapfile.go
	default:
		m.unhandled(pr, i)
	}
}

func (m *machine) mbind(pr *proc, i int) {
	op := &m.p.Ops[i]
	if op.Policy.Info().Value < 0 {
		m.result(pr, i, unpredictable("unhandled policy"))
		m.col.note("%s: the model has no rule for policy %v (unhandled policy)", opRef(m.p, i), op.Policy)
		m.forget(pr, gpage(op.Region, op.Off&^(prog.PageSize-1)), gpage(op.Region, 0)+pagesUp(op.Off+op.Len), i)
		return
	}
	lo, hi, ok := m.rangeArgs(pr, i, "mbind")
	if !ok {
		return
	}
	_, gap, unsure := m.contiguousPrefix(pr, lo, hi)
	if op.Policy == prog.PolicyDefault {
		// No policy object: MPOL_MF_DISCONTIG_OK, holes are fine as
		// long as something is mapped (queue_pages_range: EFAULT when
		// the whole range is a hole).
		unsure, gap = false, true
		for _, s := range pr.segsIn(lo, hi) {
			unsure = unsure || s.unknown
			gap = false
		}
	}
	var pd pred
	switch {
	case unsure:
		pd = unpredictable("the range covers pages the model lost track of")
	case gap && op.Policy == prog.PolicyDefault:
		pd = certain(eFAULT, "mbind fails with EFAULT on a range with nothing mapped")
	case gap:
		pd = certain(eFAULT, "mbind fails with EFAULT on a range with unmapped pages, before it changes anything")
	default:
		pd = certain(eOK, "the range is mapped")
	}
	r := m.result(pr, i, pd)
	if unsure || !pd.allows(r.Errno) {
		m.forget(pr, lo, hi, i)
		return
	}
	if gap {
		return
	}
	m.setAttr(pr, lo, hi, func(s *seg) bool { return set(&s.pol, op.Policy) })
}

// anonNameOK says whether PR_SET_VMA_ANON_NAME accepts segment s.
func (m *machine) anonNameOK(s *seg) bool {
	switch s.kind {
	case prog.AnonPrivate:
		return true
	case prog.AnonShared:
		return !m.kernelBefore(6, 2)
	}
	return false
}

func (m *machine) anonName(pr *proc, i int) {
	op := &m.p.Ops[i]
	lo, hi, ok := m.rangeArgs(pr, i, "PR_SET_VMA_ANON_NAME")
	if !ok {
		return
	}
	// madvise_walk_vmas: in order, holes skipped (ENOMEM at the end),
	// the first VMA that refuses stops it.
	type step struct{ lo, hi int }
	var steps []step
	errno, why := eOK, "the range is anonymous memory"
	gap := false
	stopAt := hi
	for g := lo; g < hi; {
		s := pr.segAt(g)
		if s == nil {
			gap = true
			next := hi
			if t := pr.segsIn(g, hi); len(t) > 0 {
				next = t[0].start
			}
			g = next
			continue
		}
		if s.unknown {
			stopAt = g
			break
		}
		if !m.anonNameOK(s) {
			errno, why = eBADF, fmt.Sprintf("only anonymous mappings can be named (EBADF), r%d is %v", op.Region, s.fullKind())
			if s.kind == prog.AnonShared {
				why = "Linux before 6.2 names no shared anonymous (shmem) mapping (EBADF)"
			}
			break
		}
		e := min(s.end, hi)
		steps = append(steps, step{g, e})
		g = e
	}
	var pd pred
	switch {
	case stopAt < hi:
		pd = unpredictable("the range covers pages the model lost track of")
	case errno == eOK && gap:
		pd = certain(eNOMEM, "the range contains unmapped pages")
	default:
		pd = certain(errno, why)
	}
	r := m.result(pr, i, pd)
	if stopAt == hi && !pd.allows(r.Errno) {
		m.forget(pr, lo, hi, i)
		return
	}
	for _, st := range steps {
		m.setAttr(pr, st.lo, st.hi, func(s *seg) bool { return set(&s.name, op.Name) })
	}
	if stopAt < hi {
		m.forget(pr, stopAt, hi, i)
	}
}

func (m *machine) pmadvise(pr *proc, i int) {
	op := &m.p.Ops[i]
	if !prog.PMadviseAdvice(op.Advice) {
		m.result(pr, i, unpredictable("unhandled advice"))
		m.col.note("%s: the model has no rule for process_madvise advice %v (unhandled advice)", opRef(m.p, i), op.Advice)
		return
	}
	if op.Len == 0 {
		// An empty iovec never reaches do_madvise, aligned or not.
		m.result(pr, i, certain(eOK, "an empty iovec advises nothing"))
		return
	}
	m.madvise(pr, i)
	m.setRet(i, op.Len)
	// One iovec: success advised all of it.
	if m.checking() && m.o.Ops[i].Errno == 0 && m.o.Ops[i].Ret != op.Len && op.Thread == 0 {
		m.cmp.advisedBytes(pr, i, m.o.Ops[i].Ret, op.Len)
	}
}
