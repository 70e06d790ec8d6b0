package executor

// migrate as any process runs it, forked children included (doc.go);
// the migrateloop thread (migrate.go) uses the same moves.

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// nextNode is the node after n among nodes (the first node for an unknown n).
//
//forkfuzz:childsafe
func nextNode(nodes []int32, n int32) int32 {
	for i, x := range nodes {
		if x == n {
			return nodes[(i+1)%len(nodes)]
		}
	}
	return nodes[0]
}

// migrate moves each page of op's range to the node after the one it is
// on. It returns the errno of move_pages (0 when the call ran; pages that
// are not mapped or not movable only get a per-page status) and how many
// pages moved.
//
//forkfuzz:childsafe
func (m *machine) migrate(op *prog.Op) (errno uintptr, moved uint64) {
	b := &m.mig
	n := int(op.Len / prog.PageSize)
	addr := uintptr(arena.RegionBase(op.Region) + op.Off)
	for k := 0; k < n; k++ {
		b.pages[k] = addr + uintptr(k)*prog.PageSize
	}
	// Where is each page now (nodes == NULL: status = node or -errno)?
	if _, e := rawSyscall6(unix.SYS_MOVE_PAGES, 0, uintptr(n), uintptr(unsafe.Pointer(&b.pages[0])), 0, uintptr(unsafe.Pointer(&b.status[0])), 0); e != 0 {
		return e, 0
	}
	return m.moveNext(0, n)
}

// moveNext moves pages [lo, hi) of m.mig to the node after the one their
// status says they are on (the query's, or the last move's: status is then
// the node each page landed on, or -errno).
//
//forkfuzz:childsafe
func (m *machine) moveNext(lo, hi int) (errno uintptr, moved uint64) {
	b := &m.mig
	n := hi - lo
	for k := lo; k < hi; k++ {
		b.nodes[k] = nextNode(numaNodes, b.status[k])
	}
	// MPOL_MF_MOVE_ALL also moves pages mapped by more than one process
	// (shared with a child after fork): it needs CAP_SYS_NICE, which the
	// executor has as root in a VM; without it, MPOL_MF_MOVE.
	flags := uintptr(unix.MPOL_MF_MOVE | unix.MPOL_MF_MOVE_ALL)
	if moveAllRefused.Load() {
		flags = unix.MPOL_MF_MOVE
	}
	// A positive result counts pages that could not be moved (busy,
	// pinned); their status says why.
	pages, nodes, status := uintptr(unsafe.Pointer(&b.pages[lo])), uintptr(unsafe.Pointer(&b.nodes[lo])), uintptr(unsafe.Pointer(&b.status[lo]))
	_, e := rawSyscall6(unix.SYS_MOVE_PAGES, 0, uintptr(n), pages, nodes, status, flags)
	if e == uintptr(unix.EPERM) && flags&unix.MPOL_MF_MOVE_ALL != 0 {
		moveAllRefused.Store(true)
		_, e = rawSyscall6(unix.SYS_MOVE_PAGES, 0, uintptr(n), pages, nodes, status, unix.MPOL_MF_MOVE)
	}
	if e != 0 {
		return e, 0
	}
	for k := lo; k < hi; k++ {
		if b.status[k] == b.nodes[k] {
			moved++
		}
	}
	return 0, moved
}

// migrateOnce runs a migrate operation (any process, any thread): the
// result is move_pages' errno and the number of pages moved.
//
//forkfuzz:childsafe
func (m *machine) migrateOnce(i int) (errno uintptr, ret uint64) {
	if len(numaNodes) < 2 {
		m.recSkip(i, obs.SkipNoNUMA, uintptr(unix.ENODEV))
		return 0, 0
	}
	return m.migrate(&m.p.Ops[i])
}
