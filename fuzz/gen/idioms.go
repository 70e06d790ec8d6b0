package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Idioms are short operation sequences in the shapes of known fork and COW
// bugs, which a random draw of independent operations almost never
// assembles (kernel/mutants/README.md, "Reach of the generator"): the
// generator plants one with probability Weights.IdiomProb.
//
//   - wipe-on-fork: MADV_WIPEONFORK over a written page of an anonymous
//     private region before the first fork (the child must read zeros).
//   - undo advice: MADV_DONTFORK or MADV_WIPEONFORK on a written range,
//     then MADV_DOFORK or MADV_KEEPONFORK on it (or part of it) before the
//     fork: the child must see the parent's data there.
//   - pinned at the first fork: an io_uring fixed buffer registered over a
//     written page before the first fork, so the fork meets a maybe-pinned
//     page (copied early, not shared) that the child reads at its start.
//   - nested fork: the child forks at once, so a grandchild takes its view
//     of regions the child inherited (VM_WIPEONFORK must survive the first
//     fork).
//   - vmsplice across COW (CVE-2020-29374's shape): one side splices a page
//     it shares with the other after fork and stops mapping it, the other
//     side writes the page, the pipe is read: the write must not show.
//   - THP mapped by PTEs (cow.c's PTE-mapped and single-PTE THP kinds):
//     a store faults a huge page into a whole PMD of a THP region, then
//     mprotect of one page read-only and back splits the PMD, or
//     MADV_DONTNEED of all but one page leaves a single PTE of the THP,
//     so the fork meets a compound page mapped by PTEs.
//   - zeropage read: MADV_POPULATE_READ over (part of) an anonymous
//     private region before the first fork, so its pages not written yet
//     are the shared zeropage at the fork, or the huge zeropage in a THP
//     region of whole PMDs (cow.c's zeropage and huge-zeropage kinds).

// noteWritten records the page that op, a store or pwrite before the first
// fork, wrote (of process 0 and inside its region; the first per region).
func (g *generator) noteWritten(op prog.Op) {
	if op.Proc != 0 || op.Off >= g.bytes(op.Region) {
		return
	}
	if g.written == nil {
		g.written = map[int]uint64{}
	}
	if _, ok := g.written[op.Region]; !ok {
		g.written[op.Region] = op.Off &^ (page - 1)
	}
}

// writtenRegion returns a region written before the first fork and a page
// offset written in it, preferring anonymous private regions (where COW
// happens) when anon is set; ok is false when nothing was written.
func (g *generator) writtenRegion(anon bool) (ri int, off uint64, ok bool) {
	var rs []int
	for r := range g.p.Regions {
		if _, w := g.written[r]; w {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return 0, 0, false
	}
	if anon {
		var a []int
		for _, r := range rs {
			if g.p.Regions[r].Kind == prog.AnonPrivate {
				a = append(a, r)
			}
		}
		if len(a) > 0 {
			rs = a
		}
	}
	ri = oneOf(g.r, rs...)
	return ri, g.written[ri], true
}

// undoAdvice returns, for a fork advice the prologue just gave
// (DONTFORK or WIPEONFORK on [off, off+n) of region ri), the advice that
// undoes it on all or part of that range (a part that keeps the page
// written before the fork; forgetting the wipe it undoes whole).
func (g *generator) undoAdvice(ri int, adv prog.Advice, off, n uint64) prog.Op {
	undo := prog.AdvDofork
	if adv == prog.AdvWipeonfork {
		undo = prog.AdvKeeponfork
	}
	if pages := n / page; pages > 1 && chance(g.r, 0.4) {
		// Part of the range, keeping the written page in it (the child
		// must find the parent's data there).
		first, end := uint64(g.r.IntN(int(pages))), pages
		if w, ok := g.written[ri]; ok && w >= off && w < off+n {
			k := (w - off) / page
			first = uint64(g.r.IntN(int(k) + 1))
			end = uint64(between(g.r, int(k)+1, int(pages)))
		} else {
			end = first + uint64(between(g.r, 1, int(pages-first)))
		}
		off, n = off+first*page, (end-first)*page
	}
	op := g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: off, Len: n, Advice: undo})
	if w := g.wipe; undo == prog.AdvKeeponfork && w != nil && w.Region == ri && op.Off <= w.Off && op.Off+op.Len >= w.Off+w.Len {
		g.wipe = nil // nothing left wiped
	}
	return op
}

// wipePrologue returns MADV_WIPEONFORK over a written page of an anonymous
// private region (the only kind the kernel wipes), half the time followed
// by MADV_KEEPONFORK on part of the range (nothing if no such page was
// written).
func (g *generator) wipePrologue() []prog.Op {
	ri, off, ok := g.writtenRegion(true)
	if !ok || g.p.Regions[ri].Kind != prog.AnonPrivate {
		return nil
	}
	pages := uint64(g.pages(ri))
	first := off / page
	lo := first - min(first, uint64(g.r.IntN(4)))
	n := min(pages-min(lo, pages), uint64(between(g.r, 1, 16))+(first-lo))
	wipe := g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: lo * page, Len: max(n, 1) * page, Advice: prog.AdvWipeonfork})
	ops := []prog.Op{wipe}
	g.noteWipe(wipe)
	if chance(g.r, 0.5) {
		ops = append(ops, g.undoAdvice(ri, prog.AdvWipeonfork, wipe.Off, wipe.Len))
	}
	return ops
}

// pinnedPrologue returns an io_uring registration over pages written
// before the first fork (nothing if no page was written or the weights
// switch registrations off).
func (g *generator) pinnedPrologue() []prog.Op {
	if g.w.UringReg <= 0 {
		return nil
	}
	ri, off, ok := g.writtenRegion(true)
	if !ok {
		return nil
	}
	n := uint64(min(between(g.r, 1, 16), prog.MaxUringPages, prog.SpanPages-int(off/page))) * page
	op := g.fix(prog.Op{Kind: prog.OpUringReg, Region: ri, Off: off, Len: n})
	reg := op
	g.uring = &reg
	return []prog.Op{op}
}

// spliceAcrossCOW returns the vmsplice idiom for fork f of process 0 (child
// process f+1): child ops to run first in the child, and parent ops to run
// after the wait (or, reversed, parent ops right after the fork and child
// ops). ok is false when the weights switch vmsplice or pipe reads off or
// no page was written before the fork.
func (g *generator) spliceAcrossCOW(f int) (afterFork, child, afterWait []prog.Op, ok bool) {
	if g.w.Vmsplice <= 0 || g.w.ReadPipe <= 0 {
		return nil, nil, nil, false
	}
	ri, off, ok := g.writtenRegion(true)
	if !ok {
		return nil, nil, nil, false
	}
	pipe := -1
	for i := range g.pipePages {
		if g.pipePages[i]+1 <= prog.PipePages {
			pipe = i
			break
		}
	}
	if pipe < 0 {
		return nil, nil, nil, false
	}
	g.pipePages[pipe]++
	store := func(proc int) prog.Op {
		return g.fix(prog.Op{Proc: proc, Kind: prog.OpStore, Region: ri, Off: off + uint64(g.r.IntN(page/8))*8, Count: between(g.r, 1, 4), Stride: prog.SlotSize})
	}
	splice := func(proc int) prog.Op {
		return prog.Op{Proc: proc, Kind: prog.OpVmsplice, Region: ri, Off: off, Len: page, Pipe: pipe}
	}
	drop := func(proc int) prog.Op {
		return prog.Op{Proc: proc, Kind: prog.OpMadvise, Region: ri, Off: off, Len: page, Advice: prog.AdvDontneed}
	}
	read := func(proc int) prog.Op { return prog.Op{Proc: proc, Kind: prog.OpReadPipe, Pipe: pipe} }
	if chance(g.r, 0.5) {
		// The child splices and exits; the parent writes and reads.
		child = []prog.Op{splice(f + 1)}
		if chance(g.r, 0.5) {
			child = append(child, drop(f+1))
		}
		return nil, child, []prog.Op{store(0), read(0)}, true
	}
	// The parent splices and drops its mapping; the child writes and reads.
	return []prog.Op{splice(0), drop(0)}, []prog.Op{store(f + 1), read(f + 1)}, nil, true
}

// noteWipe records a wipe-on-fork advice of process 0 (on an anonymous
// private region: elsewhere the kernel refuses it with EINVAL).
func (g *generator) noteWipe(op prog.Op) {
	if op.Proc == 0 && op.Kind == prog.OpMadvise && op.Advice == prog.AdvWipeonfork &&
		op.Region < len(g.p.Regions) && g.p.Regions[op.Region].Kind == prog.AnonPrivate {
		w := op
		g.wipe = &w
	}
}

// forkIdiom picks an idiom for fork f of process 0: operations for the
// parent right after the fork, for the child first, and for the parent
// right after the wait. After a wipe-on-fork advice the nested fork is
// the likelier pick: the child writes the wiped range and forks at once,
// so the grandchild's start view judges whether VM_WIPEONFORK survived.
func (g *generator) forkIdiom(f int) (afterFork, child, afterWait []prog.Op) {
	nest := chance(g.r, 0.35)
	if g.wipe != nil {
		nest = chance(g.r, 0.8)
	}
	if !nest {
		if a, c, w, ok := g.spliceAcrossCOW(f); ok {
			return a, c, w
		}
	}
	if g.w.MaxDepth < 2 || g.forks >= g.forkLimit {
		return nil, nil, nil
	}
	g.nest = true
	if w := g.wipe; w != nil {
		pages := max(int(w.Len/page), 1)
		off := w.Off + uint64(g.r.IntN(pages))*page + uint64(g.r.IntN(page/8))*8
		child = append(child, g.fix(prog.Op{Proc: f + 1, Kind: prog.OpStore, Region: w.Region, Off: off,
			Count: between(g.r, 1, min(pages, 4)), Stride: page}))
	}
	return nil, child, nil
}

// learn sets the idioms' state from an existing program (for Mutate's
// insertions): what process 0 wrote before its first fork and its last
// wipe-on-fork advice.
func (g *generator) learn(q *prog.Program) {
	forked := false
	for _, op := range q.Ops {
		if op.Proc != 0 || op.Thread != 0 {
			continue
		}
		switch op.Kind {
		case prog.OpFork:
			forked = true
		case prog.OpStore, prog.OpPwrite:
			if !forked && op.Region < len(q.Regions) {
				g.noteWritten(op)
			}
		case prog.OpMadvise:
			g.noteWipe(op)
		}
	}
}

// zeroRead returns the zeropage read of region ri (an anonymous private
// one): MADV_POPULATE_READ over a random range, or over the whole region
// when it is a THP one, so every PMD of it can map the huge zeropage.
func (g *generator) zeroRead(ri int) prog.Op {
	off, n := g.span(ri)
	if g.p.Regions[ri].THP == prog.THPOn && g.p.Regions[ri].Pages >= prog.PMDSize/page && chance(g.r, 0.7) {
		off, n = 0, g.bytes(ri)
	}
	return g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: off, Len: n, Advice: prog.AdvPopulateRead})
}

// thpSplit returns the PTE-mapped THP idiom for region ri (anonymous
// private, THP on, at least one whole PMD): a store into a PMD of it, then
// a split of that PMD (mprotect of one page read-only and back) or the
// zap of all its pages but one.
func (g *generator) thpSplit(ri int) []prog.Op {
	pmd := uint64(prog.PMDSize)
	base := uint64(g.r.IntN(int(g.bytes(ri)/pmd))) * pmd
	keep := uint64(g.r.IntN(prog.PMDSize / page))
	store := g.fix(prog.Op{Kind: prog.OpStore, Region: ri, Off: base + keep*page + uint64(g.r.IntN(page/8))*8, Count: 1, Stride: prog.SlotSize})
	g.noteWritten(store)
	if chance(g.r, 0.5) {
		at := base + uint64(between(g.r, 1, prog.PMDSize/page-1))*page
		return []prog.Op{store,
			g.fix(prog.Op{Kind: prog.OpMprotect, Region: ri, Off: at, Len: page, Prot: prog.ProtRead}),
			g.fix(prog.Op{Kind: prog.OpMprotect, Region: ri, Off: at, Len: page, Prot: prog.ProtRW})}
	}
	var ops []prog.Op
	if keep > 0 {
		ops = append(ops, g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: base, Len: keep * page, Advice: prog.AdvDontneed}))
	}
	if rest := uint64(prog.PMDSize/page) - keep - 1; rest > 0 {
		ops = append(ops, g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: base + (keep+1)*page, Len: rest * page, Advice: prog.AdvDontneed}))
	}
	return append([]prog.Op{store}, ops...)
}
