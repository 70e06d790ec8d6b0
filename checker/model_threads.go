package checker

import (
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Threads (prog "tN:" operations) run concurrently with the main thread of
// the main process, so the sequential model cannot say when their
// operations take effect. It handles them conservatively:
//   - a thread store or storeloop makes its slots "wild" from the moment
//     the main thread hands it over until the thread is joined (or the
//     program ends): whatever page is mapped at a slot's address in that
//     window may hold any value in that word, and so may every copy made of
//     it (fork, mremap); the child start views of forks in the window are
//     judged instead by the consistent-cut oracle (threads.go);
//   - a thread pwrite makes its words of the file wild;
//   - a thread odirect, procmem or pvwrite makes its words wild like a
//     store; at the join, if it succeeded and nothing else touched its
//     pages meanwhile, its values must be there (pinned.go);
//   - a thread operation that changes mappings makes its ranges unknown in
//     the main process from the hand-over on;
//   - errnos and skip counts of thread operations are not predicted.
//
// In expected mode thread operations simply run at their hand-over, which
// is one possible schedule.

// cell is a word address: global page * 512 + word index.
type cell int

func mkCell(g int, w uint16) cell { return cell(g*512 + int(w)) }

// threadState is the main process's thread bookkeeping.
type threadState struct {
	active map[cell]int   // wild windows open on each cell
	handed map[int][]cell // cells handed to each thread since its last join
	// pending are the ranges of mapping changes handed to each thread
	// since its last join: they may take effect at any moment until then.
	pending map[int][]span
	// pinned are the pinned writes (odirect, procmem, pvwrite) handed to
	// each thread since its last join (pinned.go).
	pinned map[int][]int
}

type span struct{ lo, hi, op int }

func (m *machine) hasThreads() bool {
	for i := range m.p.Ops {
		if m.p.Ops[i].Thread > 0 {
			return true
		}
	}
	return false
}

// threadOp handles an operation handed to a thread (check mode).
func (m *machine) threadOp(pr *proc, i int) {
	op := &m.p.Ops[i]
	r := m.result(pr, i, unpredictable("thread operations race with the main thread"))
	_ = r
	switch op.Kind {
	case prog.OpStore, prog.OpStoreLoop:
		if m.th.active == nil {
			m.th.active = map[cell]int{}
			m.th.handed = map[int][]cell{}
		}
		op.SlotOffsets(func(k int, off uint64) {
			c := mkCell(gpage(op.Region, off), uint16(off%prog.PageSize/prog.SlotSize))
			m.th.active[c]++
			m.th.handed[op.Thread] = append(m.th.handed[op.Thread], c)
			m.markWild(pr, c)
		})
		m.writes[i] |= wrotePrivate | wroteShared
	case prog.OpProcMem, prog.OpPVWrite, prog.OpODirect:
		m.threadPinned(pr, i)
	case prog.OpPwrite:
		obj := m.objs[m.memfd[op.Region]]
		op.SlotOffsets(func(k int, off uint64) {
			pg := obj.pages.own(int(off / prog.PageSize))
			pg.setWild(uint16(off % prog.PageSize / prog.SlotSize))
		})
		m.writes[i] |= wroteShared
	default:
		if op.Kind.HasRange() {
			if m.th.pending == nil {
				m.th.pending = map[int][]span{}
			}
			add := func(lo, hi int) {
				m.th.pending[op.Thread] = append(m.th.pending[op.Thread], span{lo, hi, i})
			}
			lo := gpage(op.Region, op.Off&^(prog.PageSize-1))
			add(lo, lo+max(pagesUp(op.Len+op.Off%prog.PageSize), pagesUp(op.NewLen)))
			if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 {
				d := gpage(op.To, op.ToOff&^(prog.PageSize-1))
				add(d, d+pagesUp(op.NewLen))
			}
			if op.Kind == prog.OpMremap && r.Errno == 0 {
				if to, ok := addrPage(r.Ret); ok {
					add(to, to+pagesUp(op.NewLen))
				}
			}
			m.forgetPending(pr)
			// Open store windows on the forgotten ranges now write
			// somewhere the model cannot follow (e.g. into another
			// region's file after a fixed mremap): rewild taints shared
			// memory for them.
			m.rewild(pr)
		}
	}
}

// forgetPending forgets every range a thread may still change.
func (m *machine) forgetPending(pr *proc) {
	if pr.id != 0 {
		return
	}
	for _, sp := range m.th.pending {
		for _, r := range sp {
			m.forget(pr, r.lo, r.hi, r.op)
		}
	}
}

// markWild makes cell c wild in whatever pr has mapped there now.
func (m *machine) markWild(pr *proc, c cell) {
	g, w := int(c)/512, uint16(int(c)%512)
	s := pr.segAt(g)
	if s == nil {
		return
	}
	if s.unknown {
		// Whatever is mapped there may be shared with other processes.
		m.taintShared = true
		return
	}
	switch s.kind {
	case prog.AnonPrivate:
		pr.anon.own(g).setWild(w)
	case prog.MemfdPrivate:
		// The thread may or may not have made a private copy.
		if _, ok := pr.anon[g]; !ok {
			pr.anon.own(g).unknown = true
		} else {
			pr.anon.own(g).setWild(w)
		}
	default:
		m.objs[s.obj].pages.own(s.pgoff + g - s.start).setWild(w)
	}
}

// rewild re-marks the open wild cells after the main thread changed what
// is mapped or what pages hold.
func (m *machine) rewild(pr *proc) {
	if pr.id != 0 || len(m.th.active) == 0 {
		return
	}
	for c := range m.th.active {
		m.markWild(pr, c)
	}
}

// join closes the wild windows of thread t; its mapping changes are done.
func (m *machine) join(t int) {
	m.forgetPending(m.procs[0])
	m.rewild(m.procs[0])
	delete(m.th.pending, t)
	for _, c := range m.th.handed[t] {
		if m.th.active[c]--; m.th.active[c] <= 0 {
			delete(m.th.active, c)
		}
	}
	delete(m.th.handed, t)
	m.settlePinned(t)
}

// cellActive reports whether a thread may still write cell (g, w) of pr.
func (m *machine) cellActive(pr *proc, g int, w uint16) bool {
	return pr.id == 0 && m.th.active[mkCell(g, w)] > 0
}
