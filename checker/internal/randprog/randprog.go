// Package randprog builds small random forkfuzz programs that stress the
// reference model's corner cases: unaligned and empty ranges, ranges over
// holes, every mremap shape (including old_len 0, DONTUNMAP and multi-VMA
// moves), locked and MADV_FREE'd memory, nested and killed forks, and
// operations of parent and child interleaved in the text. It exists for
// the checker's own tests (package fuzz/gen is the real generator).
package randprog

import (
	"math/rand/v2"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Build returns a random valid program with about n operations.
func Build(r *rand.Rand, n int) *prog.Program {
	b := &builder{r: r, p: &prog.Program{}}
	nreg := 1 + r.IntN(5)
	for i := 0; i < nreg; i++ {
		pages := 1 + r.IntN(16)
		switch r.IntN(10) {
		case 0:
			pages = 512 + r.IntN(100)
		case 1, 2:
			pages = 16 + r.IntN(64)
		}
		b.p.Regions = append(b.p.Regions, prog.Region{Kind: prog.RegionKind(r.IntN(int(prog.HugetlbPrivate))) /* not hugetlb: unmodelled */, Pages: pages, THP: prog.THP(r.IntN(prog.NumTHPs))})
	}
	b.budget = n
	ops := b.proc(0, 0)
	b.p.Ops = ops
	return b.p
}

// pick returns one of xs, uniformly (it draws r.IntN(len(xs)), as a
// literal bound would).
func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

type builder struct {
	r      *rand.Rand
	p      *prog.Program
	budget int
	forks  int
}

// proc generates the operations of process id (including its forks'
// subtrees), in text order.
func (b *builder) proc(id, depth int) []prog.Op {
	var out []prog.Op
	for b.budget > 0 {
		if b.r.IntN(12) == 0 && id != 0 {
			break
		}
		b.budget--
		if b.r.IntN(7) == 0 && depth < 3 && b.forks < prog.MaxForks {
			out = append(out, b.fork(id, depth)...)
			continue
		}
		out = append(out, b.op(id))
	}
	return out
}

func (b *builder) fork(id, depth int) []prog.Op {
	f := b.forks
	b.forks++
	child := f + 1
	out := []prog.Op{{Proc: id, Kind: prog.OpFork, Fork: f}}
	var parent []prog.Op
	for k := b.r.IntN(5); k > 0 && b.budget > 0; k-- {
		b.budget--
		parent = append(parent, b.op(id))
	}
	kill := b.r.IntN(8) == 0
	var kid []prog.Op
	if !kill || b.r.IntN(2) == 0 {
		kid = b.proc(child, depth+1)
	}
	// Interleave the child's and the parent's lines; the child runs
	// only at the wait anyway. The child's own subtrees stay contiguous
	// enough to remain valid because they only refer to its forks.
	i, j := 0, 0
	for i < len(parent) || j < len(kid) {
		if j >= len(kid) || i < len(parent) && b.r.IntN(2) == 0 {
			out = append(out, parent[i])
			i++
		} else {
			out = append(out, kid[j])
			j++
		}
	}
	if kill {
		out = append(out, prog.Op{Proc: id, Kind: prog.OpKill, Fork: f})
		if b.r.IntN(3) == 0 && b.budget > 0 {
			b.budget--
			out = append(out, b.op(id))
		}
	}
	return append(out, prog.Op{Proc: id, Kind: prog.OpWait, Fork: f})
}

func (b *builder) region() int { return b.r.IntN(len(b.p.Regions)) }

// off picks a page-ish offset in region reg, sometimes past its pages.
func (b *builder) off(reg int) uint64 {
	pages := b.p.Regions[reg].Pages
	pg := b.r.IntN(pages + 2)
	if b.r.IntN(8) == 0 {
		pg = pages + b.r.IntN(pages+1)
	}
	return uint64(pg) * prog.PageSize
}

func (b *builder) length(reg int) uint64 {
	pages := b.p.Regions[reg].Pages
	n := 1 + b.r.IntN(max(1, pages/2+1))
	switch b.r.IntN(10) {
	case 0:
		n = pages + 1 + b.r.IntN(4)
	case 1:
		n = 1
	}
	return uint64(n) * prog.PageSize
}

func (b *builder) clamp(off, n uint64) (uint64, uint64) {
	if off > prog.SpanBytes {
		off = prog.SpanBytes - prog.PageSize
	}
	if n > prog.SpanBytes-off {
		n = prog.SpanBytes - off
	}
	return off, n
}

func (b *builder) op(id int) prog.Op {
	r := b.r
	reg := b.region()
	op := prog.Op{Proc: id, Region: reg}
	switch k := r.IntN(20); {
	case k < 6:
		op.Kind = prog.OpStore
		if b.p.Regions[reg].Kind.Memfd() && r.IntN(3) == 0 {
			op.Kind = prog.OpPwrite
		}
		op.Count = 1 + r.IntN(8)
		if r.IntN(6) == 0 {
			op.Count = 64 + r.IntN(600)
		}
		op.Stride = pick(r, []uint64{8, 8, 0x1000, 0x1008, 0x2000, 0x40})
		op.Off = b.off(reg) + uint64(r.IntN(512))*8
		for op.Off+uint64(op.Count-1)*op.Stride+8 > prog.SpanBytes {
			op.Count /= 2
			if op.Count == 0 {
				op.Count, op.Off = 1, 0
			}
		}
	case k < 7:
		op.Kind = prog.OpCheck
		op.Region = 0
	case k < 15:
		op.Kind = pick(r, []prog.OpKind{prog.OpMmap, prog.OpMunmap, prog.OpMprotect, prog.OpMadvise, prog.OpMadvise,
			prog.OpMlock, prog.OpMunlock, prog.OpMprotect})
		op.Off, op.Len = b.clamp(b.off(reg), b.length(reg))
		switch r.IntN(16) {
		case 0:
			op.Off += 8 // unaligned
		case 1:
			op.Len = 0
		case 2:
			op.Len += 100 // unaligned length
		}
		op.Off, op.Len = b.clamp(op.Off, op.Len)
		op.Prot = prog.Prot(r.IntN(prog.NumProts))
		op.Advice = prog.Advice(r.IntN(prog.NumAdvices))
		if op.Kind != prog.OpMprotect {
			op.Prot = 0
		}
		if op.Kind != prog.OpMadvise {
			op.Advice = 0
		}
	default:
		op.Kind = prog.OpMremap
		b.mremap(&op)
	}
	return op
}

func (b *builder) mremap(op *prog.Op) {
	r := b.r
	reg := op.Region
	op.Off, op.Len = b.clamp(b.off(reg), b.length(reg))
	switch r.IntN(9) {
	case 0: // grow in place or fail
		op.NewLen = op.Len + uint64(1+r.IntN(4))*prog.PageSize
	case 1: // grow, may move
		op.NewLen = op.Len + uint64(1+r.IntN(8))*prog.PageSize
		op.Flags = prog.MremapMaymove
	case 2: // shrink
		if op.Len > prog.PageSize {
			op.NewLen = op.Len - prog.PageSize
		} else {
			op.NewLen = op.Len
		}
		op.Flags = pick(r, []prog.MremapFlags{0, prog.MremapMaymove})
	case 3, 4: // move to another region
		op.Flags = prog.MremapMaymove | prog.MremapFixed
		op.NewLen = op.Len
		if r.IntN(3) == 0 {
			op.NewLen = op.Len + uint64(r.IntN(3)-1)*prog.PageSize
			if op.NewLen == 0 {
				op.NewLen = prog.PageSize
			}
		}
		op.To = b.region()
		op.ToOff = b.off(op.To)
		if op.To == reg {
			op.ToOff = op.Off + op.Len + uint64(r.IntN(4))*prog.PageSize
		}
	case 5: // dontunmap
		op.Flags = prog.MremapMaymove | prog.MremapDontunmap
		op.NewLen = op.Len
		if r.IntN(2) == 0 {
			op.Flags |= prog.MremapFixed
			op.To = b.region()
			op.ToOff = b.off(op.To)
			if op.To == reg {
				op.ToOff = op.Off + op.Len + uint64(r.IntN(4))*prog.PageSize
			}
		}
	case 6: // duplicate (old_len 0)
		op.Len = 0
		op.NewLen = uint64(1+r.IntN(4)) * prog.PageSize
		op.Flags = prog.MremapMaymove
		if r.IntN(2) == 0 {
			op.Flags |= prog.MremapFixed
			op.To = b.region()
			op.ToOff = b.off(op.To)
		}
	case 7: // invalid
		op.NewLen = op.Len
		op.Flags = prog.MremapFlags(r.IntN(1 << prog.NumMremapFlags)) // every combination of the flag bits
		if op.Flags&prog.MremapFixed != 0 {
			op.To = b.region()
			op.ToOff = b.off(op.To) + uint64(r.IntN(2))*8
		}
		if r.IntN(2) == 0 {
			op.NewLen = 0
		}
	default: // same size
		op.NewLen = op.Len
	}
	if op.Flags&prog.MremapFixed == 0 {
		op.To, op.ToOff = 0, 0
		if op.NewLen > prog.SpanBytes-op.Off {
			op.NewLen = prog.SpanBytes - op.Off
		}
	} else if op.NewLen > prog.SpanBytes-op.ToOff {
		if op.ToOff > prog.SpanBytes-prog.PageSize {
			op.ToOff = 0
		}
		op.NewLen = min(op.NewLen, prog.SpanBytes-op.ToOff)
	}
}
