package sim

import "github.com/forkfuzz/forkfuzz/fuzz/obs"

// Async-fork. See the package doc for the lock order and the invariants.

// asyncCopy is one Async-fork copy in flight: the child's kernel thread
// that copies PMD and PTE levels from the parent, PMD by PMD.
type asyncCopy struct {
	fork          int
	parent, child *MM
	// pending lists the parent PMDs (2 MiB-aligned addresses) that the fast
	// path write-protected, in address order; next is the copier's cursor.
	pending []uint64
	next    int
	// phase of the copier within pending[next]: 0 between PMDs; 1 holds the
	// table lock and has checked RW; 2 has copied the first half.
	phase int
	table *PTETable // locked by the copier in phases 1-2
	ctx   *allocCtx
	// childCtx, when set, counts the copier's own allocations instead of
	// ctx: the child's fail-nth (childfail, childfail.go), which the
	// parent's syncs do not reach.
	childCtx *allocCtx
	// err is why the copy failed.
	err error
	// speed decides how eagerly the scheduler runs the copier.
	speed int
	// done: finished (copied, failed or aborted); killed: the child gets
	// SIGKILL because the copy failed.
	done, killed bool
}

// forkAsync is Async-fork's fast path in the parent: duplicate VMAs, copy
// PGD/PUD levels and write-protect every parent PMD under a VMA whose page
// tables need copying.
func (k *Kernel) forkAsync(parent *MM, f int, ctx *allocCtx) (*MM, error) {
	if len(parent.copies) > 0 && !k.mut.has(MutAsyncNestedFork) {
		// A new fork must first complete the copy still running.
		for _, c := range append([]*asyncCopy(nil), parent.copies...) {
			k.runCopy(c)
		}
	}
	child := k.newMM()
	c := &asyncCopy{fork: f, parent: parent, child: child, ctx: ctx, speed: k.sched.IntN(4)}
	seen := make(map[uint64]bool)
	for _, v := range parent.vmas {
		if k.skipsFork(v) {
			continue
		}
		cv, err := k.dupVMA(v, child)
		if err == nil && k.needsCopy(v, cv) {
			// Copy PGD/PUD: the child gets its upper levels now.
			_, err = child.pmdOf(v.Start, true)
		}
		if err != nil {
			k.rollback(c, v)
			child.teardown()
			return nil, err
		}
		if !k.needsCopy(v, cv) {
			continue
		}
		parent.forEachPMD(v.Start, v.End, func(a uint64, pe *PMDEntry) {
			if seen[a] {
				return
			}
			seen[a] = true
			pe.Flags &^= PMDRW
			c.pending = append(c.pending, a)
		})
	}
	if len(c.pending) == 0 {
		c.done = true
		return child, nil
	}
	parent.copies = append(parent.copies, c)
	k.copies = append(k.copies, c)
	return child, nil
}

// step runs one step of the copier. It reports whether it did anything.
func (k *Kernel) step(c *asyncCopy) bool {
	if c.done {
		return false
	}
	saved := k.ctx
	k.ctx = c.ctx
	if c.childCtx != nil {
		k.ctx = c.childCtx
	}
	defer func() { k.ctx = saved }()
	if c.phase == 0 {
		for c.next < len(c.pending) {
			a := c.pending[c.next]
			pe, _ := c.parent.pmdOf(a, false)
			if pe == nil || !pe.present() || pe.rw() {
				c.next++
				continue
			}
			if pe.huge() {
				if err := k.copyPMDPart(c, a, 0, entries); err != nil {
					k.copyFailed(c, err)
					return true
				}
				pe.Flags |= PMDRW
				c.next++
				return true
			}
			if !k.mut.has(MutAsyncNoPTL) {
				pe.Table.lockedBy = c
			}
			c.table = pe.Table
			c.phase = 1
			return true
		}
		k.finishCopy(c)
		return true
	}
	a := c.pending[c.next]
	half := entries / 2
	if c.phase == 1 {
		if err := k.copyPMDPart(c, a, 0, half); err != nil {
			k.copyFailed(c, err)
			return true
		}
		c.phase = 2
		return true
	}
	if err := k.copyPMDPart(c, a, half, entries); err != nil {
		k.copyFailed(c, err)
		return true
	}
	if pe, _ := c.parent.pmdOf(a, false); pe != nil && pe.present() {
		pe.Flags |= PMDRW
	}
	k.unlockCopier(c)
	c.phase = 0
	c.next++
	return true
}

func (k *Kernel) unlockCopier(c *asyncCopy) {
	if c.table != nil && c.table.lockedBy == c {
		c.table.lockedBy = nil
	}
	c.table = nil
}

// copyPMDPart copies PTE slots [from, to) of the parent PMD at a into the
// child, for every child VMA there whose page tables need copying.
func (k *Kernel) copyPMDPart(c *asyncCopy, a uint64, from, to int) error {
	lo, hi := a+uint64(from)*pageSize, a+uint64(to)*pageSize
	for _, cv := range c.child.overlapping(lo, hi) {
		pv := c.parent.vmaAt(max(cv.Start, lo))
		if cv.Flags&VMWipeOnFork != 0 && !k.mut.has(MutAsyncWipeCopied) {
			continue
		}
		if cv.anonVMA == 0 && cv.Flags&VMWipeOnFork == 0 {
			continue // fork did not need to copy this VMA
		}
		_ = pv
		if err := k.copyRange(c.parent, c.child, max(cv.Start, lo), min(cv.End, hi)); err != nil {
			return err
		}
	}
	return nil
}

// syncPMD is the parent's proactive synchronization of one PMD: copy the
// PMD and all 512 PTEs under it to the child, then give the RW bit back.
// touched is the address the parent is about to change.
func (k *Kernel) syncPMD(m *MM, c *asyncCopy, a, touched uint64) {
	pe, _ := m.pmdOf(a, false)
	if pe == nil || !pe.present() || pe.rw() || c.done {
		return
	}
	if pe.Table != nil && pe.Table.lockedBy != nil && !k.mut.has(MutAsyncNoPTL) {
		// The copier holds the table lock: wait for it (the scheduler
		// runs the copier until it lets go), then re-check the RW bit.
		owner := pe.Table.lockedBy.(*asyncCopy)
		for pe.Table != nil && pe.Table.lockedBy == owner && !owner.done {
			k.step(owner)
		}
		if pe.rw() || c.done {
			return
		}
	}
	saved := k.ctx
	k.ctx = c.ctx
	defer func() { k.ctx = saved }()
	var err error
	if k.mut.has(MutAsyncSyncPTEOnly) && !pe.huge() {
		err = k.copyOne(c, touched&^pageMask)
	} else {
		err = k.copyPMDPart(c, a, 0, entries)
	}
	if err != nil {
		k.copyFailed(c, err)
		return
	}
	pe.Flags |= PMDRW
}

// copyOne copies the single PTE at a (MutAsyncSyncPTEOnly).
func (k *Kernel) copyOne(c *asyncCopy, a uint64) error {
	cv := c.child.vmaAt(a)
	if cv == nil || cv.anonVMA == 0 {
		return nil
	}
	return k.copyRange(c.parent, c.child, a, a+pageSize)
}

// syncVMAs is the VMA-level synchronization before the parent changes the
// mappings of [s, e): it copies every pending PMD under every VMA that
// overlaps the range. The parent holds its mmap write lock, so a copier in
// the middle of a PMD (holding the mmap read lock) finishes that PMD first.
func (k *Kernel) syncVMAs(m *MM, s, e uint64, mut mutantBit) {
	if k.cfg.Mode != Async || len(m.copies) == 0 {
		return
	}
	for _, c := range m.copies {
		for c.phase != 0 && !c.done {
			k.step(c)
		}
	}
	if mut != 0 && k.mut.has(mut) || len(m.copies) == 0 {
		return
	}
	c := m.copies[len(m.copies)-1]
	for _, v := range m.overlapping(s, e) {
		for _, a := range c.pending {
			if a+pmdSize > v.Start && a < v.End && !c.done {
				k.syncPMD(m, c, a, a)
			}
		}
	}
}

// runCopy runs the copier of c to the end.
func (k *Kernel) runCopy(c *asyncCopy) {
	for !c.done {
		k.step(c)
	}
}

// preempt is a scheduling point: the seeded scheduler lets background
// copiers run some steps.
func (k *Kernel) preempt() {
	for _, c := range k.copies {
		if c.done {
			continue
		}
		var n int
		switch c.speed {
		case 0: // only runs when someone waits for it
		case 1:
			if k.sched.IntN(16) == 0 {
				n = 1
			}
		case 2:
			if k.sched.IntN(3) == 0 {
				n = 1 + k.sched.IntN(2)
			}
		default:
			n = k.sched.IntN(5)
		}
		for ; n > 0 && !c.done; n-- {
			k.step(c)
		}
	}
}

func (k *Kernel) finishCopy(c *asyncCopy) {
	// Recovery: every PMD still write-protected gets RW back.
	for _, a := range c.pending {
		if pe, _ := c.parent.pmdOf(a, false); pe != nil && pe.present() {
			pe.Flags |= PMDRW
		}
	}
	k.retire(c)
}

func (k *Kernel) retire(c *asyncCopy) {
	k.unlockCopier(c)
	c.done = true
	c.phase = 0
	out := c.parent.copies[:0]
	for _, x := range c.parent.copies {
		if x != c {
			out = append(out, x)
		}
	}
	c.parent.copies = out
	out = k.copies[:0]
	for _, x := range k.copies {
		if x != c {
			out = append(out, x)
		}
	}
	k.copies = out
	k.checkPMDs(c.parent, c.fork)
}

// copyFailed handles an allocation failure during the background copy or
// a proactive sync: give RW back to every remaining parent PMD, kill the
// child.
func (k *Kernel) copyFailed(c *asyncCopy, err error) {
	var cur *VMA
	if c.next < len(c.pending) {
		cur = c.parent.vmaAt(c.pending[c.next])
	}
	k.restoreRW(c, cur)
	c.killed = true
	c.err = err
	k.retire(c)
}

// abortCopy stops the copy because the child got SIGKILL.
func (k *Kernel) abortCopy(c *asyncCopy) {
	if !k.mut.has(MutAsyncKillNoRecover) {
		k.restoreRW(c, nil)
	}
	c.killed = true
	k.retire(c)
}

// rollback undoes the fast path after a failure while forking VMA cur.
func (k *Kernel) rollback(c *asyncCopy, cur *VMA) {
	k.restoreRW(c, cur)
}

// restoreRW sets RW on every pending PMD; the rollback mutant only does it
// for PMDs under the VMA being copied when the failure hit.
func (k *Kernel) restoreRW(c *asyncCopy, cur *VMA) {
	for _, a := range c.pending {
		if k.mut.has(MutAsyncRollbackPartial) && (cur == nil || a+pmdSize <= cur.Start || a >= cur.End) {
			continue
		}
		if pe, _ := c.parent.pmdOf(a, false); pe != nil && pe.present() {
			pe.Flags |= PMDRW
		}
	}
}

// checkPMDs is the rollback invariant, read straight from the page tables:
// once no copy is in flight for m, none of its PMDs may be write-protected.
func (k *Kernel) checkPMDs(m *MM, f int) {
	if len(m.copies) > 0 || m.dead {
		return
	}
	for _, e := range m.PMDEntries() {
		if !e.RW {
			k.event(obs.EvPMDRWNotRestored, f, "after fork f%d finished, %v's PMD at %#x is still write-protected", f, m, e.Addr)
			return
		}
	}
}
