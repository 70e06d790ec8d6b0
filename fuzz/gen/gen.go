package gen

import (
	"math/rand/v2"
	"slices"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Generate returns a new random valid program drawn from r with weights w.
// The same r state and w give the same program.
func Generate(r *rand.Rand, w Weights) *prog.Program {
	p := generate(r, w)
	if p.Validate() != nil {
		return Repair(p) // never expected; the tests check generate alone
	}
	return p
}

// generator holds the state of one Generate call (or one Mutate insertion).
type generator struct {
	r     *rand.Rand
	w     Weights
	p     *prog.Program
	forks int // forks created so far
	// forkBase is added to fork numbers: Mutate uses identifiers that do
	// not collide with the program's own forks, and Repair renumbers.
	forkBase  int
	forkLimit int // forks this generator may create
	nops      int // operations created so far
	// busy marks threads running a storeloop whose fork's wait was
	// deferred: the main thread must neither join them nor hand them
	// another storeloop (both would block until that wait).
	busy [prog.MaxThreads + 1]bool
	// Pinned operations: pages spliced into each pipe so far, the last
	// registration, and the child that a racing procmem/pvwrite may write
	// into (Into; 0: none).
	pipePages [prog.MaxPipes]int
	uring     *prog.Op
	into      int
	// Idioms (idioms.go): a page offset of each region process 0 wrote
	// before its first fork, the last wipe-on-fork advice of process 0,
	// and whether the next child must fork at once.
	written map[int]uint64
	wipe    *prog.Op
	nest    bool
}

func generate(r *rand.Rand, w Weights) *prog.Program {
	w = w.normalized()
	g := &generator{r: r, w: w, p: &prog.Program{}, forkLimit: w.MaxForks}
	g.regions()
	ops := g.prologue()
	ops = append(ops, g.process(0, 0, between(r, 1, g.w.Steps), true)...)
	g.p.Ops = ops
	FixJoins(g.p)    // join at the end the threads forkBlock left running
	if g.hugetlb() { // hugetlb.go
		g.p = Repair(g.p)
	}
	g.fileRegion() // files.go
	g.p.Arena = g.arena()
	return g.p
}

// arena draws the program's placement (Weights.ArenaLowProb). It draws one
// number whatever the program, after everything else.
func (g *generator) arena() prog.Arena {
	aimed := false
	for _, op := range g.p.Ops {
		aimed = aimed || op.Kind == prog.OpMigrate || op.Kind == prog.OpMigrateLoop || (op.Kind == prog.OpFork && op.Proc == 0 && op.FailNth > 0)
	}
	u := g.r.Float64()
	if u < g.w.ArenaLowProb || (aimed && u < g.w.ArenaLowAimedProb) {
		return prog.ArenaLow
	}
	return prog.ArenaTop
}

// regions creates MinRegions..MaxRegions regions within MaxTotalPages.
func (g *generator) regions() {
	n := between(g.r, g.w.MinRegions, g.w.MaxRegions)
	budget := g.w.MaxTotalPages
	for i := 0; i < n; i++ {
		pages := min(g.size(), budget-(n-i-1))
		pages = min(max(pages, 1), prog.MaxRegionPages)
		budget -= pages
		r := prog.Region{
			Kind:  prog.RegionKind(pick(g.r, g.w.RegionKinds[:])),
			Pages: pages,
			THP:   prog.THP(pick(g.r, g.w.THP[:])),
		}
		g.p.Regions = append(g.p.Regions, r)
	}
}

// size draws a region size in pages from the size classes.
func (g *generator) size() int {
	switch pick(g.r, g.w.Sizes[:]) {
	case 0:
		return between(g.r, 1, 4)
	case 1:
		return between(g.r, 5, 64)
	case 2:
		return between(g.r, 65, 511)
	case 3:
		return oneOf(g.r, 512, 513, 1024, 1536, 2048, between(g.r, 512, 2048))
	default:
		return between(g.r, 2049, max(2049, g.w.MaxTotalPages))
	}
}

// prologue fills memory before the first fork: stores near boundaries in
// most regions, pwrites to memfds, and now and then fork-related advice,
// mlock or read-only protection.
func (g *generator) prologue() []prog.Op {
	var ops []prog.Op
	for i, reg := range g.p.Regions {
		if chance(g.r, 0.8) {
			op := g.slotOp(0, prog.OpStore, i)
			g.noteWritten(op)
			ops = append(ops, op)
		}
		if reg.Kind.Memfd() && chance(g.r, 0.5) {
			op := g.slotOp(0, prog.OpPwrite, i)
			g.noteWritten(op)
			ops = append(ops, op)
		}
		if chance(g.r, 0.2) {
			adv := oneOf(g.r, prog.AdvDontfork, prog.AdvDontfork, prog.AdvWipeonfork, prog.AdvWipeonfork, prog.AdvHugepage, prog.AdvCollapse, prog.AdvDontneed, prog.AdvMergeable, prog.AdvPageout)
			if reg.Kind == prog.AnonPrivate && adv != prog.AdvWipeonfork && chance(g.r, 0.2) {
				adv = prog.AdvWipeonfork // the only kind the kernel wipes
			}
			off, n := g.span(i)
			op := g.fix(prog.Op{Kind: prog.OpMadvise, Region: i, Off: off, Len: n, Advice: adv})
			ops = append(ops, op)
			g.noteWipe(op)
			if (adv == prog.AdvDontfork || adv == prog.AdvWipeonfork) && chance(g.r, 2*g.w.IdiomProb) {
				ops = append(ops, g.undoAdvice(i, adv, op.Off, op.Len))
			}
		}
		// (THP regions of whole PMDs more often: the huge zeropage is
		// rarer at fork, a later store in the PMD splits it.)
		zp := g.w.IdiomProb
		if reg.THP == prog.THPOn && reg.Pages >= prog.PMDSize/page {
			zp = min(1, 2.5*zp)
		}
		if reg.Kind == prog.AnonPrivate && chance(g.r, zp) {
			ops = append(ops, g.zeroRead(i))
		}
		if reg.Kind == prog.AnonPrivate && reg.THP == prog.THPOn && reg.Pages >= prog.PMDSize/page && chance(g.r, g.w.IdiomProb) {
			ops = append(ops, g.thpSplit(i)...)
		}
		if chance(g.r, 0.05) {
			ops = append(ops, g.rangeOp(0, prog.OpMlock, i)...)
		}
		if chance(g.r, 0.05) {
			off, n := g.span(i)
			ops = append(ops, g.fix(prog.Op{Kind: prog.OpMprotect, Region: i, Off: off, Len: n, Prot: prog.ProtRead}))
		}
	}
	if chance(g.r, g.w.IdiomProb) {
		ops = append(ops, g.pinnedPrologue()...)
	}
	if chance(g.r, g.w.IdiomProb) {
		ops = append(ops, g.wipePrologue()...)
	}
	g.nops += len(ops)
	return ops
}

// process generates up to steps steps of process proc at nesting depth
// depth (0 for the main process). Every fork it creates is waited for
// before it returns. first forces the first step to be a fork.
func (g *generator) process(proc, depth, steps int, first bool) []prog.Op {
	var out []prog.Op
	var pending []int // forks of this process not waited for yet
	killed := make(map[int]bool)
	canFork := depth < g.w.MaxDepth && (depth == 0 || chance(g.r, g.w.NestProb))
	if g.nest && depth > 0 {
		g.nest = false
		canFork = depth < g.w.MaxDepth
		first = canFork
	}
	forkNext := first
	for i := 0; i < steps && g.nops < g.w.MaxOps; i++ {
		if len(pending) > 0 && !forkNext && chance(g.r, 0.3) {
			j := g.r.IntN(len(pending))
			out = append(out, prog.Op{Proc: proc, Kind: prog.OpWait, Fork: pending[j]})
			g.nops++
			pending = append(pending[:j], pending[j+1:]...)
			continue
		}
		kind := g.pickKind(proc, depth, canFork, len(pending) > 0)
		if forkNext && canFork && g.forks < g.forkLimit && g.w.Fork > 0 {
			kind = prog.OpFork
		}
		forkNext = false
		switch kind {
		case prog.OpFork:
			ops, deferred := g.forkBlock(proc, depth)
			out = append(out, ops...)
			if deferred >= 0 {
				pending = append(pending, deferred)
				forkNext = chance(g.r, 0.5)
			}
		case prog.OpKill:
			f := pending[g.r.IntN(len(pending))]
			if !killed[f] {
				killed[f] = true
				out = append(out, prog.Op{Proc: proc, Kind: prog.OpKill, Fork: f})
				g.nops++
			}
		default:
			ops := g.simple(proc, kind)
			if proc == 0 {
				for _, op := range ops {
					g.noteWipe(op)
				}
			}
			g.nops += len(ops)
			out = append(out, ops...)
		}
	}
	g.r.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	for _, f := range pending {
		out = append(out, prog.Op{Proc: proc, Kind: prog.OpWait, Fork: f})
		g.nops++
	}
	return out
}

// pickKind draws the kind of a process step.
func (g *generator) pickKind(proc, depth int, canFork, pending bool) prog.OpKind {
	ws := g.w.opWeights()
	ws[prog.OpWait] = 0
	if depth > 0 {
		ws[prog.OpStore] *= 2
		ws[prog.OpCheck] *= 3
	}
	allowed := func(k prog.OpKind) bool {
		switch k {
		case prog.OpFork:
			return canFork && g.forks < g.forkLimit
		case prog.OpKill:
			return pending
		case prog.OpPwrite:
			return g.memfdRegion() >= 0
		case prog.OpWait, prog.OpStoreLoop, prog.OpMigrateLoop:
			return false
		}
		return pinnedAllowed(k, proc)
	}
	for k := range ws {
		if !allowed(prog.OpKind(k)) {
			ws[k] = 0
		}
	}
	k := prog.OpKind(pick(g.r, ws))
	if !allowed(k) {
		return prog.OpStore
	}
	return k
}

// forkBlock generates a fork in proc, an optional kill, a burst of racing
// parent operations, the child's operations (interleaved with the burst in
// the text; the child only runs at the wait) and the wait. With
// DeferWaitProb the wait is left out and the fork returned as deferred.
func (g *generator) forkBlock(proc, depth int) (ops []prog.Op, deferred int) {
	f := g.forkBase + g.forks
	g.forks++
	var joins []prog.Op
	if proc == 0 && chance(g.r, g.w.ThreadProb) && g.w.MaxWriters > 0 {
		ops, joins = g.writerThreads(f)
	}
	ml := g.migrateLoop(proc, f, &ops, &joins)
	if proc == 0 && g.w.PreForkAdviceProb > 0 && chance(g.r, g.w.PreForkAdviceProb) {
		ri := g.r.IntN(len(g.p.Regions))
		off, n := g.span(ri)
		adv := oneOf(g.r, prog.AdvPageout, prog.AdvPageout, prog.AdvMergeable, prog.AdvMergeable, prog.AdvCollapse, prog.AdvCold, prog.AdvPopulateWrite)
		if adv == prog.AdvMergeable {
			// KSM merges private anonymous pages only: aim at such a
			// region where there is one (a default campaign's census
			// saw no KSM page at 146 forks without this).
			var anon []int
			for i, r := range g.p.Regions {
				if r.Kind == prog.AnonPrivate {
					anon = append(anon, i)
				}
			}
			if len(anon) > 0 {
				ri = anon[g.r.IntN(len(anon))]
				off, n = g.span(ri)
			}
			// Present zero-filled pages are identical: ksmd merges
			// them (the executor waits for it), so the fork meets
			// KSM pages.
			ops = append(ops, g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: off, Len: n, Advice: prog.AdvPopulateWrite}))
			g.nops++
		}
		ops = append(ops, g.fix(prog.Op{Kind: prog.OpMadvise, Region: ri, Off: off, Len: n, Advice: adv}))
		g.nops++
	}
	ops = append(ops, g.forkOp(proc, f))
	g.nops++
	if ml.region >= 0 && chance(g.r, 0.5) {
		st := g.everyPage(proc, ml.region, g.w.MaxStorePages)
		ops = append(ops, st...)
		g.nops += len(st)
	}
	if g.w.EveryPageProb > 0 && chance(g.r, g.w.EveryPageProb) {
		for ri := range g.p.Regions {
			st := g.everyPage(proc, ri, g.w.MaxStorePages)
			ops = append(ops, st...)
			g.nops += len(st)
		}
	}
	killed := chance(g.r, g.w.KillProb)
	killFirst := chance(g.r, 0.6)
	if killed && killFirst {
		ops = append(ops, prog.Op{Proc: proc, Kind: prog.OpKill, Fork: f})
		g.nops++
	}
	var idiomChild, afterWait []prog.Op
	idiomProb := g.w.IdiomProb
	if g.wipe != nil {
		idiomProb = min(1, 3*idiomProb)
	}
	if proc == 0 && chance(g.r, idiomProb) {
		var afterFork []prog.Op
		afterFork, idiomChild, afterWait = g.forkIdiom(f)
		ops = append(ops, afterFork...)
		g.nops += len(afterFork) + len(idiomChild) + len(afterWait)
	}
	race := g.race(proc, f)
	child := g.child(f, depth, killed, idiomChild)
	g.nest = false
	ops = append(ops, interleave(g.r, race, child)...)
	if killed && !killFirst {
		ops = append(ops, prog.Op{Proc: proc, Kind: prog.OpKill, Fork: f})
		g.nops++
	}
	if len(joins) == 0 && len(afterWait) == 0 && ml.streak == 0 && chance(g.r, g.w.DeferWaitProb) {
		for _, op := range ops {
			if op.Kind.RunsUntil() {
				g.busy[op.Thread] = true
			}
		}
		return ops, f
	}
	g.nops++
	ops = append(ops, prog.Op{Proc: proc, Kind: prog.OpWait, Fork: f})
	ops = append(ops, afterWait...)
	if ml.streak > 0 && g.forks < g.forkLimit {
		st, last := g.migrateStreak(ml.region, ml.streak)
		ops = append(ops, st...)
		ops[ml.index].Fork = last
	}
	g.nops += len(joins)
	return append(ops, joins...), -1
}

// writerThreads are storeloops of writer threads storing all through
// fork f and the child's copy, and the joins of some of them.
func (g *generator) writerThreads(f int) (ops, joins []prog.Op) {
	for t := 1; t <= between(g.r, 1, min(g.w.MaxWriters, prog.MaxThreads)); t++ {
		if g.busy[t] {
			continue
		}
		ri := g.r.IntN(len(g.p.Regions))
		var op prog.Op
		if g.w.EveryPageWriterProb > 0 && chance(g.r, g.w.EveryPageWriterProb) {
			st := g.everyPage(0, ri, g.w.MaxStorePages)
			op = st[g.r.IntN(len(st))]
		} else {
			op = g.slotOp(0, prog.OpStore, ri)
			op.Count = min(op.Count, 64)
		}
		op.Kind, op.Thread, op.Fork = prog.OpStoreLoop, t, f
		ops = append(ops, op)
		if chance(g.r, 0.5) {
			joins = append(joins, prog.Op{Kind: prog.OpJoin, Peer: t})
		}
	}
	g.nops += len(ops)
	return ops, joins
}

// forkMigration is the migrateloop of a fork block: the region it moves
// (-1: none), its index in the block, and the further forks it runs over.
type forkMigration struct {
	region, index, streak int
}

// migrateLoop adds, with MigrateLoopProb, a migrateloop moving a region
// during fork f (and maybe its join) to ops.
func (g *generator) migrateLoop(proc, f int, ops, joins *[]prog.Op) forkMigration {
	ml := forkMigration{region: -1, index: -1}
	if proc != 0 || g.w.MigrateLoopProb <= 0 || !chance(g.r, g.w.MigrateLoopProb) {
		return ml
	}
	t := g.freeThread(*ops)
	if t <= 0 {
		return ml
	}
	op := g.migrateOp(0, g.region())
	op.Kind, op.Thread, op.Fork = prog.OpMigrateLoop, t, f
	ml.region = op.Region
	if g.w.MigrateForks > 1 && chance(g.r, 0.7) {
		ml.streak = between(g.r, 1, g.w.MigrateForks-1)
	}
	if chance(g.r, 0.6) {
		// Every page of the region present and written since the last
		// fork: a private page mid-move then has a writable migration
		// entry, the kind fork must make read-only on both sides
		// (copy_nonpresent_pte).
		st := g.everyPage(0, op.Region, g.w.MaxStorePages)
		*ops = append(*ops, st...)
		g.nops += len(st)
	}
	ml.index = len(*ops)
	*ops = append(*ops, op)
	g.nops++
	if chance(g.r, 0.5) {
		*joins = append(*joins, prog.Op{Kind: prog.OpJoin, Peer: t})
	}
	return ml
}

// forkOp is fork f in proc, with an injected failure of the main
// process's fork (FailNthProb, ChildFailProb).
func (g *generator) forkOp(proc, f int) prog.Op {
	fork := prog.Op{Proc: proc, Kind: prog.OpFork, Fork: f}
	if proc == 0 && g.w.MaxFailNth > 0 && chance(g.r, g.w.FailNthProb) {
		fork.FailNth = between(g.r, 1, min(g.w.MaxFailNth, prog.MaxFailNth))
	} else if proc == 0 && g.w.MaxChildFail > 0 && g.w.ChildFailProb > 0 && chance(g.r, g.w.ChildFailProb) {
		fork.ChildFail = between(g.r, 1, min(g.w.MaxChildFail, prog.MaxFailNth))
	}
	return fork
}

// race is, with RaceProb, a burst of parent operations racing fork f's
// child, some of them on threads.
func (g *generator) race(proc, f int) []prog.Op {
	if !chance(g.r, g.w.RaceProb) {
		return nil
	}
	var race []prog.Op
	g.into = f + 1
	for n := between(g.r, 1, g.w.RaceOps); n > 0; n-- {
		race = append(race, g.raceOp(proc)...)
	}
	g.into = 0
	g.nops += len(race)
	for i := range race {
		op := &race[i]
		if proc == 0 && op.Kind != prog.OpCheck && (!op.Kind.Pinned() || prog.ThreadablePinned(op)) && chance(g.r, g.w.ThreadVMAProb) &&
			!(op.Kind == prog.OpMmap && g.p.Regions[op.Region].Kind == prog.AnonShared) {
			op.Thread = between(g.r, 1, max(1, min(g.w.MaxWriters, prog.MaxThreads)))
		}
	}
	return race
}

// child is fork f's operations after idiomChild: a process of its own
// (rarely when the child is killed).
func (g *generator) child(f, depth int, killed bool, idiomChild []prog.Op) []prog.Op {
	child := idiomChild
	if killed && !chance(g.r, 0.2) {
		return child
	}
	if g.w.EveryPageChildProb > 0 && chance(g.r, g.w.EveryPageChildProb) {
		for ri := range g.p.Regions {
			st := g.everyPage(f+1, ri, g.w.MaxStorePages)
			child = append(child, st...)
			g.nops += len(st)
		}
	}
	return append(child, g.process(f+1, depth+1, between(g.r, 1, g.w.ChildSteps), false)...)
}

// migrateStreak returns up to n more forks of the main process while a
// migrateloop keeps moving region ri (its until= is the last of them):
// before each fork the parent has stored to every page of the region, so
// each page is private, present and writable again (the kind whose
// migration entry fork must make read-only); after it the parent stores
// again, and the child checks its view. One fork meets a page mid-move in
// a small fraction of runs, so a loop gets several.
func (g *generator) migrateStreak(ri, n int) (ops []prog.Op, last int) {
	ops = g.everyPage(0, ri, g.w.MaxStorePages)
	for k := 0; k < n && g.forks < g.forkLimit; k++ {
		fk := g.forkBase + g.forks
		g.forks++
		last = fk
		ops = append(ops, prog.Op{Kind: prog.OpFork, Fork: fk})
		ops = append(ops, g.everyPage(0, ri, g.w.MaxStorePages)...)
		ops = append(ops, prog.Op{Proc: fk + 1, Kind: prog.OpCheck}, prog.Op{Kind: prog.OpWait, Fork: fk})
	}
	g.nops += len(ops)
	return ops, last
}

// everyPage returns stores by proc of one slot in every page of region ri
// (its pages at creation; pages an mremap grew are past them, pages an
// munmap or mprotect took away are skipped by the executor and the model),
// at most maxPages pages a store (0: one store for all).
func (g *generator) everyPage(proc, ri, maxPages int) []prog.Op {
	off := uint64(g.r.IntN(page/8)) * 8
	n := g.pages(ri)
	if maxPages <= 0 {
		maxPages = n
	}
	maxPages = min(maxPages, prog.MaxCount)
	var out []prog.Op
	for first := 0; first < n; first += maxPages {
		out = append(out, prog.Op{Proc: proc, Kind: prog.OpStore, Region: ri, Off: uint64(first)*page + off,
			Count: min(n-first, maxPages), Stride: page})
	}
	return out
}

// freeThread returns a thread (1..MaxThreads) that runs no loop and
// none of ops, or 0.
func (g *generator) freeThread(ops []prog.Op) int {
	for t := 1; t <= prog.MaxThreads; t++ {
		if g.busy[t] || slices.ContainsFunc(ops, func(op prog.Op) bool { return op.Thread == t }) {
			continue
		}
		return t
	}
	return 0
}

// migrateOp returns a migrate of region ri: the whole region (up to
// MaxMigratePages), or a window of it.
func (g *generator) migrateOp(proc, ri int) prog.Op {
	n := g.pages(ri)
	op := prog.Op{Proc: proc, Kind: prog.OpMigrate, Region: ri}
	w := min(n, prog.MaxMigratePages)
	first := 0
	if chance(g.r, 0.4) {
		w = between(g.r, 1, w)
		first = g.r.IntN(n - w + 1)
	}
	op.Off, op.Len = uint64(first)*page, uint64(w)*page
	return op
}

// interleave merges a and b in a random order that keeps the order within
// each.
func interleave(r *rand.Rand, a, b []prog.Op) []prog.Op {
	out := make([]prog.Op, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && r.IntN(len(a)+len(b)) < len(a)) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// raceOp returns parent operations for right after a fork: stores into
// memory the copy is still working on, and VMA changes.
func (g *generator) raceOp(proc int) []prog.Op {
	ws := g.w.opWeights()
	ws[prog.OpStore] += ws[prog.OpStore] / 2
	ws[prog.OpFork], ws[prog.OpKill], ws[prog.OpWait] = 0, 0, 0
	ws[prog.OpCheck] = min(ws[prog.OpCheck], 1)
	if g.memfdRegion() < 0 {
		ws[prog.OpPwrite] = 0
	}
	for k := range ws {
		if !pinnedAllowed(prog.OpKind(k), proc) {
			ws[k] = 0
		}
	}
	k := prog.OpKind(pick(g.r, ws))
	switch k {
	case prog.OpFork, prog.OpKill, prog.OpWait:
		k = prog.OpStore
	case prog.OpPwrite:
		if g.memfdRegion() < 0 {
			k = prog.OpStore
		}
	}
	return g.simple(proc, k)
}
