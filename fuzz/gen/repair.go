package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

const (
	numOpKinds     = prog.NumOpKinds
	numAdvices     = prog.NumAdvices
	numRegionKinds = prog.NumRegionKinds
	numTHP         = prog.NumTHPs
	numProts       = prog.NumProts
	mremapAll      = prog.MremapMaymove | prog.MremapFixed | prog.MremapDontunmap
)

// Repair returns a valid program as close to p as it can: it clamps
// regions and arguments into range, turns a pwrite to a non-memfd region
// into a store, drops operations of processes that are not alive, waits and
// kills of unknown forks and forks past prog.MaxForks, waits for every fork
// still alive when its parent needs it reaped, and renumbers forks in order.
// Fork identifiers in p may be any integers; when two fork operations carry
// the same identifier, later references mean the most recent one. Fields
// that an operation's kind does not use are zeroed, so the result
// round-trips through Format and Parse exactly. p is not modified.
func Repair(p *prog.Program) *prog.Program {
	q := &prog.Program{Arena: p.Arena}
	if q.Arena > prog.ArenaLow {
		q.Arena = prog.ArenaTop
	}
	for _, r := range p.Regions {
		if len(q.Regions) == prog.MaxRegions {
			break
		}
		q.Regions = append(q.Regions, fixRegion(r))
	}
	if len(q.Regions) == 0 {
		q.Regions = []prog.Region{{Kind: prog.AnonPrivate, Pages: 1}}
	}
	ops := p.Ops
	// Leave room for the waits Repair may have to add (a valid program
	// needs none).
	if max := prog.MaxOps - prog.MaxForks; len(ops) > max && p.Validate() != nil {
		ops = ops[:max]
	}
	rp := &repairer{q: q, ids: map[int]int{}, loopsFor: map[int][]int{}}
	for _, op := range ops {
		rp.op(op)
	}
	rp.reap(-1)
	fixLoops(q)
	fixPinned(q)
	FixJoins(q)
	return q
}

// repairFork is a fork of the repaired program: its parent (a new
// process number) and whether it is alive.
type repairFork struct {
	parent int
	alive  bool
}

// repairer builds the repaired program q an operation at a time.
type repairer struct {
	q        *prog.Program
	forks    []repairFork  // by new number
	ids      map[int]int   // old identifier -> new number
	loopsFor map[int][]int // old fork identifier -> storeloops (in q) waiting for it
}

// proc is the new number of old process number old, if it is alive.
func (rp *repairer) proc(old int) (int, bool) {
	if old == 0 {
		return 0, true
	}
	n, ok := rp.ids[old-1]
	if !ok || !rp.forks[n].alive {
		return 0, false
	}
	return n + 1, true
}

// descends reports whether fork g descends from fork f.
func (rp *repairer) descends(g, f int) bool {
	for x := g; rp.forks[x].parent != 0; {
		x = rp.forks[x].parent - 1
		if x == f {
			return true
		}
	}
	return false
}

// reap waits for every live descendant of f (all live forks if f < 0),
// deepest first.
func (rp *repairer) reap(f int) {
	for g := len(rp.forks) - 1; g > f; g-- {
		if rp.forks[g].alive && (f < 0 || rp.descends(g, f)) {
			rp.q.Ops = append(rp.q.Ops, prog.Op{Proc: rp.forks[g].parent, Kind: prog.OpWait, Fork: g})
			rp.forks[g].alive = false
		}
	}
}

// op adds op, repaired, to q (or drops it).
func (rp *repairer) op(op prog.Op) {
	q, forks := rp.q, rp.forks
	if int(op.Kind) >= numOpKinds {
		return
	}
	pr, ok := rp.proc(op.Proc)
	if !ok {
		return
	}
	switch op.Kind {
	case prog.OpFork:
		rp.fork(op, pr)
	case prog.OpWait, prog.OpKill:
		n, ok := rp.ids[op.Fork]
		if !ok || !forks[n].alive || forks[n].parent != pr {
			return
		}
		if op.Kind == prog.OpWait {
			rp.reap(n)
			forks[n].alive = false
		}
		q.Ops = append(q.Ops, prog.Op{Proc: pr, Kind: op.Kind, Fork: n})
	default:
		op.Proc = pr
		fo := fixOp(op, q.Regions)
		if fo.Kind.RunsUntil() {
			// The loop's fork usually comes later: resolve it then.
			fo.Fork = -1
			if n, ok := rp.ids[op.Fork]; ok && forks[n].alive {
				fo.Fork = n
			} else {
				rp.loopsFor[op.Fork] = append(rp.loopsFor[op.Fork], len(q.Ops))
			}
		}
		if fo.Into > 0 {
			// into= names a child of this process that is alive.
			if n, ok := rp.ids[fo.Into-1]; ok && forks[n].alive && forks[n].parent == pr {
				fo.Into = n + 1
			} else {
				fo.Into = 0
			}
		}
		q.Ops = append(q.Ops, fo)
	}
}

// fork adds fork op, of new process pr, unless there are MaxForks.
func (rp *repairer) fork(op prog.Op, pr int) {
	n := len(rp.forks)
	if n == prog.MaxForks {
		delete(rp.ids, op.Fork)
		return
	}
	rp.ids[op.Fork] = n
	for _, j := range rp.loopsFor[op.Fork] {
		rp.q.Ops[j].Fork = n
	}
	delete(rp.loopsFor, op.Fork)
	f := prog.Op{Proc: pr, Kind: prog.OpFork, Fork: n}
	if pr == 0 {
		// Injected faults stay with the fork (main process only).
		f.FailNth = min(max(op.FailNth, 0), prog.MaxFailNth)
		f.OOMMemcg = min(op.OOMMemcg, prog.MaxOOMMemcg)
		if f.FailNth == 0 && f.OOMMemcg == 0 {
			f.ChildFail = min(max(op.ChildFail, 0), prog.MaxFailNth)
			if f.ChildFail == 0 {
				f.ChildOOM = min(op.ChildOOM, prog.MaxOOMMemcg)
			}
		}
	}
	rp.q.Ops = append(rp.q.Ops, f)
	rp.forks = append(rp.forks, repairFork{parent: pr, alive: true})
}

// FixJoins makes the joins of p valid: it drops every join of a thread that
// ran no operation before it, and joins at the end of the program every
// thread whose operations are not joined after they ran (what the
// executor does anyway when the program ends). Without room for a join
// (MaxOps), the thread's unjoined operations move to the main thread.
func FixJoins(p *prog.Program) {
	ran := map[int]bool{}
	out := p.Ops[:0]
	for _, op := range p.Ops {
		if op.Kind == prog.OpJoin && !ran[op.Peer] {
			continue
		}
		if op.Kind != prog.OpJoin && op.Thread > 0 {
			ran[op.Thread] = true
		}
		out = append(out, op)
	}
	p.Ops = out
	lastOp, lastJoin := map[int]int{}, map[int]int{}
	for i, op := range p.Ops {
		if op.Kind == prog.OpJoin {
			lastJoin[op.Peer] = i
		} else if op.Thread > 0 {
			lastOp[op.Thread] = i
		}
	}
	for t := 1; t <= prog.MaxThreads; t++ {
		i, ok := lastOp[t]
		if j, joined := lastJoin[t]; !ok || (joined && j > i) {
			continue
		}
		if len(p.Ops) < prog.MaxOps {
			p.Ops = append(p.Ops, prog.Op{Kind: prog.OpJoin, Peer: t})
			continue
		}
		from := lastJoin[t] // 0 when never joined: every operation moves
		for k := from; k < len(p.Ops); k++ {
			if op := &p.Ops[k]; op.Kind != prog.OpJoin && op.Thread == t {
				op.Thread = 0
				unloop(op)
			}
		}
	}
}

// unloop turns a storeloop into a store and a migrateloop into a migrate
// (one pass, no until=): what a loop becomes where it cannot run until a
// wait.
func unloop(op *prog.Op) {
	switch op.Kind {
	case prog.OpStoreLoop:
		op.Kind, op.Fork = prog.OpStore, 0
	case prog.OpMigrateLoop:
		op.Kind, op.Fork = prog.OpMigrate, 0
	}
}

// fixLoops turns every storeloop or migrateloop whose until-fork is not
// forked and then waited for by the main process after the loop into one
// pass (unloop).
func fixLoops(p *prog.Program) {
	for i := range p.Ops {
		op := &p.Ops[i]
		if !op.Kind.RunsUntil() {
			continue
		}
		ok := false
		for j := i + 1; j < len(p.Ops) && op.Fork >= 0; j++ {
			if w := p.Ops[j]; w.Kind == prog.OpWait && w.Proc == 0 && w.Fork == op.Fork {
				ok = true
			}
		}
		if fi := p.ForkOp(op.Fork); !ok || fi < 0 || p.Ops[fi].Proc != 0 {
			unloop(op)
		}
	}
	// A join or a loop queued behind a loop of its thread that runs until
	// a later wait would block forever: drop the join, make the later
	// loop one pass.
	waitAt := map[int]int{}
	for j, op := range p.Ops {
		if op.Kind == prog.OpWait && op.Proc == 0 {
			waitAt[op.Fork] = j
		}
	}
	busyUntil := map[int]int{} // thread -> index of the latest wait its loops run until
	out := p.Ops[:0]
	for j, op := range p.Ops {
		t := op.Thread
		if op.Kind == prog.OpJoin {
			t = op.Peer
		}
		blocked := busyUntil[t] > j
		switch {
		case op.Kind == prog.OpJoin && blocked:
			continue
		case op.Kind.RunsUntil() && blocked:
			unloop(&op)
		case op.Kind.RunsUntil():
			busyUntil[t] = max(busyUntil[t], waitAt[op.Fork])
		}
		out = append(out, op)
	}
	p.Ops = out
}

func fixRegion(r prog.Region) prog.Region {
	r.Kind = prog.RegionKind(((int(r.Kind) % prog.NumRegionKinds) + prog.NumRegionKinds) % prog.NumRegionKinds)
	r.THP = prog.THP(int(r.THP) % numTHP)
	r.Pages = min(max(r.Pages, 1), prog.MaxRegionPages)
	if r.Kind.Hugetlb() {
		// Whole 2 MiB pages (hugetlb.go).
		r.Pages = min((r.Pages+prog.HugetlbPages-1)/prog.HugetlbPages*prog.HugetlbPages, prog.MaxRegionPages/prog.HugetlbPages*prog.HugetlbPages)
		r.THP = prog.THPDefault
	}
	return r
}

// fixRegionRef maps any region number into range.
func fixRegionRef(r, n int) int {
	return ((r % n) + n) % n
}

// fixOp clamps the arguments of a non-fork operation into range and zeroes
// the fields its kind does not use.
func fixOp(op prog.Op, regions []prog.Region) prog.Op {
	const span = prog.SpanBytes
	q := prog.Op{Proc: op.Proc, Kind: op.Kind}
	if op.Proc == 0 && op.Thread > 0 && op.Kind != prog.OpCheck {
		q.Thread = (op.Thread-1)%prog.MaxThreads + 1
	}
	switch op.Kind {
	case prog.OpCheck:
		return q
	case prog.OpJoin:
		if q.Proc != 0 {
			return prog.Op{Proc: q.Proc, Kind: prog.OpCheck}
		}
		q.Thread, q.Peer = 0, (max(op.Peer, 1)-1)%prog.MaxThreads+1
		return q
	case prog.OpStoreLoop, prog.OpMigrateLoop:
		if q.Thread == 0 {
			unloop(&q)
		}
	}
	q.Region = fixRegionRef(op.Region, len(regions))
	if q.Kind == prog.OpMigrate || q.Kind == prog.OpMigrateLoop {
		size := max(uint64(regions[q.Region].Pages)*page, page)
		q.Off = op.Off % size &^ (page - 1)
		q.Len = min(max(op.Len&^(page-1), page), prog.MaxMigratePages*page)
		return q
	}
	if q.Kind.Pinned() && !q.Kind.WritesSlots() {
		return fixPinnedOp(q, op)
	}
	if q.Kind == prog.OpMmap && regions[q.Region].Kind == prog.AnonShared {
		q.Thread = 0
	}
	switch q.Kind {
	case prog.OpStore, prog.OpPwrite, prog.OpStoreLoop, prog.OpProcMem, prog.OpPVWrite:
		if q.Kind.Pinned() {
			q.Into = max(op.Into, 0)
			if q.Into > 0 {
				q.Thread = 0
			}
		}
		if q.Kind == prog.OpPwrite && !regions[q.Region].Kind.Memfd() {
			q.Kind = prog.OpStore
			for i, r := range regions {
				if r.Kind.Memfd() {
					q.Kind, q.Region = prog.OpPwrite, i
					break
				}
			}
		}
		q.Off = op.Off % span &^ (prog.SlotSize - 1)
		q.Stride = min(op.Stride&^(prog.SlotSize-1), span)
		if q.Stride == 0 {
			q.Stride = prog.SlotSize
		}
		q.Count = min(max(op.Count, 1), prog.MaxCount)
		if fit := (span-q.Off-prog.SlotSize)/q.Stride + 1; uint64(q.Count) > fit {
			q.Count = int(fit)
		}
		return q
	}
	q.Off = min(op.Off, span)
	q.Len = min(op.Len, span-q.Off)
	switch op.Kind {
	case prog.OpMprotect:
		q.Prot = prog.Prot(int(op.Prot) % numProts)
	case prog.OpMadvise:
		q.Advice = prog.Advice(int(op.Advice) % numAdvices)
	case prog.OpPMadvise:
		q.Advice = prog.AdvCold
		if op.Advice == prog.AdvPageout {
			q.Advice = prog.AdvPageout
		}
	case prog.OpMbind:
		q.Policy = prog.Policy(int(op.Policy) % prog.NumPolicies)
	case prog.OpAnonName:
		q.Name = prog.AnonName(int(op.Name) % prog.NumAnonNames)
	case prog.OpRemapFile:
		q.PgOff = min(op.PgOff, prog.MaxPgOff)
	case prog.OpMremap:
		q.Flags = op.Flags & mremapAll
		if q.Flags&prog.MremapFixed != 0 {
			q.To = fixRegionRef(op.To, len(regions))
			q.ToOff = min(op.ToOff, span)
			q.NewLen = min(op.NewLen, span-q.ToOff)
		} else {
			q.NewLen = min(op.NewLen, span-q.Off)
		}
	}
	return q
}
