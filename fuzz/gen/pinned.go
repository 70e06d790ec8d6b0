package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Pinned and out-of-fault-path operations (prog/pinned.go): GUP writes
// from /proc/PID/mem and process_vm_writev (often into a child that is
// still blocked, right after fork), O_DIRECT and io_uring fixed reads that
// write pinned pages, vmsplice of pages the program writes afterwards, and
// userfaultfd write protection.

// pinnedAllowed reports whether a process may run kind k (the ring and the
// userfaultfd belong to the main process).
func pinnedAllowed(k prog.OpKind, proc int) bool {
	switch k {
	case prog.OpUringReg, prog.OpUringRead, prog.OpUffdWP:
		return proc == 0
	}
	return true
}

// pinnedOp returns a pinned operation of kind k for proc, or a store where
// the program's state does not allow k (a full pipe, no registration).
func (g *generator) pinnedOp(proc int, k prog.OpKind) []prog.Op {
	ri := g.region()
	switch k {
	case prog.OpProcMem, prog.OpPVWrite:
		op := g.slotOp(proc, prog.OpStore, ri)
		op.Kind = k
		if g.into > 0 && chance(g.r, 0.6) {
			op.Into = g.into
		}
		return []prog.Op{op}
	case prog.OpReadPipe:
		return []prog.Op{{Proc: proc, Kind: k, Pipe: g.r.IntN(prog.MaxPipes)}}
	case prog.OpUringRead:
		u := g.uring
		if u == nil {
			return g.pinnedOp(proc, prog.OpUringReg)
		}
		n := u.Len / page
		first := uint64(g.r.IntN(int(n)))
		cnt := uint64(between(g.r, 1, int(min(n-first, prog.MaxIOPages))))
		return []prog.Op{{Proc: proc, Kind: k, Region: u.Region, Off: u.Off + first*page, Len: cnt * page}}
	}
	op := prog.Op{Proc: proc, Kind: k, Region: ri}
	op.Off, op.Len = g.ioRange(ri, k)
	switch k {
	case prog.OpVmsplice:
		op.Pipe = g.r.IntN(prog.MaxPipes)
		n := int(op.Len / page)
		if g.pipePages[op.Pipe]+n > prog.PipePages {
			return []prog.Op{g.slotOp(proc, prog.OpStore, ri)}
		}
		g.pipePages[op.Pipe] += n
	case prog.OpUringReg:
		reg := op
		g.uring = &reg
	}
	return []prog.Op{op}
}

// ioRange returns a page-aligned range of region ri for an I/O operation:
// mostly inside the region, sometimes across its end or a PMD boundary.
func (g *generator) ioRange(ri int, k prog.OpKind) (off, n uint64) {
	pages := g.pages(ri)
	limit := prog.MaxIOPages
	if k == prog.OpUringReg {
		limit = 64
	}
	cnt := oneOf(g.r, 1, 1, 2, between(g.r, 1, 4), between(g.r, 1, limit))
	first := g.r.IntN(pages)
	switch {
	case chance(g.r, 0.15): // across the end of the region
		first = max(0, pages-cnt/2-1)
	case chance(g.r, 0.2) && pages*page > pmd: // across a PMD boundary
		b := between(g.r, 1, pages*page/pmd) * (pmd / page)
		first = max(0, b-cnt/2)
	}
	if k == prog.OpUffdWP && chance(g.r, 0.5) {
		first, cnt = 0, min(pages, prog.SpanPages)
	}
	return uint64(first) * page, uint64(cnt) * page
}

// fixPinned makes the pinned operations of p valid after Repair's other
// passes: a vmsplice that would overfill its pipe becomes a readpipe, a
// uringread outside the last registration becomes a registration, and
// into= references a child that is alive and ours or nothing.
func fixPinned(p *prog.Program) {
	var pipe [prog.MaxPipes]int
	var reg *prog.Op
	alive := map[int]int{} // fork -> the process that forked it, while not waited for
	for i := range p.Ops {
		op := &p.Ops[i]
		switch op.Kind {
		case prog.OpFork:
			alive[op.Fork] = op.Proc
		case prog.OpWait:
			delete(alive, op.Fork)
		case prog.OpProcMem, prog.OpPVWrite:
			if op.Into > 0 {
				if parent, ok := alive[op.Into-1]; !ok || parent != op.Proc {
					op.Into = 0
				}
			}
		case prog.OpVmsplice:
			n := int(op.Len / page)
			if pipe[op.Pipe]+n > prog.PipePages {
				*op = prog.Op{Proc: op.Proc, Kind: prog.OpReadPipe, Pipe: op.Pipe}
				continue
			}
			pipe[op.Pipe] += n
		case prog.OpUringReg:
			r := *op
			reg = &r
		case prog.OpUringRead:
			if reg == nil || reg.Region != op.Region || op.Off < reg.Off || op.Off+op.Len > reg.Off+reg.Len {
				op.Kind = prog.OpUringReg
				r := *op
				reg = &r
			}
		}
	}
}

// fixPinnedOp clamps the arguments of a pinned operation that takes a
// page range or a pipe (fixOp's part for them); q has Proc, Kind and
// Region set.
func fixPinnedOp(q prog.Op, op prog.Op) prog.Op {
	if q.Kind != prog.OpODirect {
		q.Thread = 0
	}
	if !pinnedAllowed(q.Kind, q.Proc) {
		q.Kind = prog.OpODirect
	}
	switch q.Kind {
	case prog.OpReadPipe:
		return prog.Op{Proc: q.Proc, Kind: q.Kind, Pipe: ((op.Pipe % prog.MaxPipes) + prog.MaxPipes) % prog.MaxPipes}
	}
	limit := uint64(prog.MaxIOPages)
	switch q.Kind {
	case prog.OpUringReg:
		limit = prog.MaxUringPages
	case prog.OpUffdWP:
		limit = prog.SpanPages
	}
	q.Off = min(op.Off/page, prog.SpanPages-1) * page
	q.Len = min(max(op.Len/page, 1), limit, prog.SpanPages-q.Off/page) * page
	if q.Kind == prog.OpVmsplice {
		q.Pipe = ((op.Pipe % prog.MaxPipes) + prog.MaxPipes) % prog.MaxPipes
	}
	return q
}
