package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The model of remapfile: remap_file_pages(2) with prot 0 and no flags,
// as Linux 6.1 emulates it (mm/mmap.c, SYSCALL_DEFINE5(remap_file_pages)):
//
//   - start and size are rounded down to pages; less than a page is
//     EINVAL;
//   - the VMA at start must exist and be VM_SHARED (a memfd, a file or a
//     shared anonymous mapping, which is shmem), else EINVAL;
//   - if the range runs past that VMA, the VMAs it runs into must follow
//     without a hole, map the same file and have the same vm_flags, else
//     EINVAL. Protection, lock (and VM_LOCKONFAULT), the attribute
//     advices and a uffd registration are flags; a memory policy, an
//     anonymous name and the file offset are not;
//   - then do_mmap(MAP_SHARED|MAP_FIXED|MAP_POPULATE, and MAP_LOCKED if
//     the first VMA is locked) of that file at page pgoff with the first
//     VMA's protection: a fresh segment (no advice, policy, name or
//     registration; VM_LOCKED without VM_LOCKONFAULT) whose pages are the
//     object's pages pgoff, pgoff+1, ..., beyond EOF past the object's
//     size. Populating it faults nothing private in (the mapping is
//     shared) and its errors are ignored: the call returns 0.
//
// Hugetlb mappings are not modelled (hugeOp, and a hugetlb segment met on
// the way): unpredictable, the range forgotten.

// remapFile runs a remapfile in the model.
func (m *machine) remapFile(pr *proc, i int) {
	op := &m.p.Ops[i]
	lo := gpage(op.Region, op.Off&^(prog.PageSize-1))
	n := int(op.Len / prog.PageSize)
	if n == 0 {
		m.result(pr, i, certain(eINVAL, "remap_file_pages of less than a page (the size is rounded down) fails with EINVAL"))
		return
	}
	hi := lo + n
	var pd pred
	var first seg
	if s := pr.segAt(lo); s != nil {
		first = *s
	}
	switch s := pr.segAt(lo); {
	case s == nil:
		pd = certain(eINVAL, "remap_file_pages needs a mapping at the start of the range (EINVAL)")
	case s.unknown:
		pd = unpredictable("the start of the range lies in pages the model lost track of")
	case s.huge:
		pd = unpredictable("remap_file_pages of hugetlb pages is not modelled")
		m.col.note("%s: the model does not follow remap_file_pages of hugetlb pages; its range is not judged", opRef(m.p, i))
	case !s.kind.Shared():
		pd = certain(eINVAL, fmt.Sprintf("remap_file_pages needs a shared mapping at the start of the range (EINVAL), %s is %v", pageRef(lo), s.fullKind()))
	default:
		pd = m.remapRest(pr, s, hi)
	}
	r := m.result(pr, i, pd)
	if len(pd.errnos) == 0 || !pd.allows(r.Errno) {
		m.forget(pr, lo, hi, i)
		return
	}
	if r.Errno != 0 {
		return // refused before anything changed
	}
	pr.unmap(lo, hi)
	s := seg{start: lo, end: hi, kind: first.kind, fs: first.fs, obj: first.obj, pgoff: int(op.PgOff), prot: first.prot,
		lock: first.lock, origin: i, originWhy: fmt.Sprintf("remap_file_pages of page %#x", op.PgOff)}
	// MAP_POPULATE (and MAP_LOCKED) faults the range in with read
	// faults: nothing private on a shared mapping.
	pr.insert(s)
}

// remapRest checks the segments after first up to hi, which
// remap_file_pages requires to continue first's VMA: no hole, the same
// file, the same vm_flags.
func (m *machine) remapRest(pr *proc, first *seg, hi int) pred {
	ok := certain(eOK, "the range is one shared mapping, or mappings of one file with the same flags and no hole")
	unsure := false
	fail := func(why string) pred {
		if unsure {
			return unpredictable("the range covers pages the model lost track of before " + why)
		}
		return certain(eINVAL, why+" (EINVAL)")
	}
	for g := first.end; g < hi; {
		s := pr.segAt(g)
		switch {
		case s == nil:
			return fail(fmt.Sprintf("the range runs into unmapped pages at %s", pageRef(g)))
		case s.unknown || s.huge:
			unsure = true
		case s.obj != first.obj:
			return fail(fmt.Sprintf("the range runs into a mapping of another object at %s", pageRef(g)))
		default:
			switch sameVMFlags(first, s) {
			case no:
				return fail(fmt.Sprintf("the range runs into a mapping with other flags (protection, lock, advice or uffd) at %s", pageRef(g)))
			case maybe:
				unsure = true
			}
		}
		g = s.end
	}
	if unsure {
		return unpredictable("the range covers pages whose mapping or lock state the model lost track of")
	}
	return ok
}

// sameVMFlags says whether segments a and b (not unknown) have the same
// vm_flags: yes, no, or maybe (a lock state the model lost).
func sameVMFlags(a, b *seg) tri {
	if a.kind != b.kind || a.huge != b.huge || a.prot != b.prot || a.dontfork != b.dontfork || a.wipe != b.wipe ||
		a.mergeable != b.mergeable || a.thp != b.thp || a.uffd != b.uffd {
		return no
	}
	switch {
	case a.lock == maybe || b.lock == maybe:
		return maybe
	case a.lock != b.lock, a.lock == yes && a.onfault != b.onfault:
		return no
	}
	return yes
}

// pageRef names global page g for explanations.
func pageRef(g int) string {
	r, p := regionOf(g)
	return fmt.Sprintf("r%d page %d", r, p)
}
