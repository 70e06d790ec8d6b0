package checker

import (
	"fmt"
	"sort"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// view handles a view that process pr takes now.
func (m *machine) view(pr *proc, at int) {
	if !m.checking() {
		m.exp.Views = append(m.exp.Views, m.expectedView(pr, at))
		return
	}
	m.spec.view(m, pr, at)
	m.cmp.view(pr, at)
}

// stRun is a run of pages [lo, hi) in one expected state.
type stRun struct {
	lo, hi  int
	state   obs.PageState
	unknown bool
}

// expRuns returns the expected page states of pr in [lo, hi).
func (m *machine) expRuns(pr *proc, lo, hi int) []stRun {
	var out []stRun
	for _, s := range pr.segsIn(lo, hi) {
		switch {
		case s.unknown:
			out = append(out, stRun{s.start, s.end, 0, true})
		case s.prot == prog.ProtNone:
			out = append(out, stRun{s.start, s.end, obs.NoAccess, false})
		default:
			eof := s.end
			if s.obj >= 0 {
				eof = min(s.end, s.start+max(0, m.objs[s.obj].size-s.pgoff))
			}
			if eof > s.start {
				out = append(out, stRun{s.start, eof, obs.Readable, false})
			}
			if eof < s.end {
				out = append(out, stRun{eof, s.end, obs.BeyondEOF, false})
			}
		}
	}
	return out
}

// expContent returns the expected content of readable page g of segment
// s (nil: zero), or unknown.
func (m *machine) expContent(pr *proc, s *seg, g int) (*page, bool) {
	var pg *page
	switch s.kind {
	case prog.AnonPrivate:
		pg = pr.anon[g]
	case prog.MemfdPrivate:
		if p, ok := pr.anon[g]; ok {
			pg = p
		} else {
			if m.taintShared {
				return nil, true
			}
			pg = m.objs[s.obj].pages[s.pgoff+g-s.start]
		}
	default:
		if m.taintShared {
			return nil, true
		}
		pg = m.objs[s.obj].pages[s.pgoff+g-s.start]
	}
	if pg != nil && pg.unknown {
		return nil, true
	}
	return pg, false
}

// contentPages returns the pages of [lo, hi) (readable pages of segment
// s) that may have non-zero content, sorted.
func (m *machine) contentPages(pr *proc, s *seg, lo, hi int) []int {
	var out []int
	if s.kind == prog.AnonPrivate || s.kind == prog.MemfdPrivate {
		out = pr.anon.keysIn(lo, hi)
	}
	if s.obj >= 0 {
		base := s.pgoff - s.start
		for _, k := range m.objs[s.obj].pages.keysIn(lo+base, hi+base) {
			out = append(out, k-base)
		}
		sort.Ints(out)
		out = uniq(out)
	}
	return out
}

func uniq(s []int) []int {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, x := range s[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// pageDigest computes a page's digest and non-zero count.
func pageDigest(w words) (uint64, int) {
	var d uint64
	for _, x := range w {
		d += obs.WordDigest(uint64(x.k)*prog.SlotSize, x.v)
	}
	return d, len(w)
}

// expectedView builds the view the model predicts (expected mode).
func (m *machine) expectedView(pr *proc, at int) obs.View {
	v := obs.View{Proc: pr.id, At: at}
	for _, s := range pr.segs {
		if s.unknown {
			continue
		}
		vm := obs.VMA{Start: gaddr(s.start), End: gaddr(s.end), Prot: protString(&s)}
		if s.obj >= 0 {
			vm.Offset = uint64(s.pgoff) * prog.PageSize
			vm.Inode = uint64(1000 + s.obj)
		}
		v.VMAs = append(v.VMAs, vm)
	}
	for r := range m.p.Regions {
		base := r * prog.SpanPages
		for _, run := range m.expRuns(pr, base, base+prog.SpanPages) {
			if run.unknown {
				continue
			}
			n := len(v.Runs)
			if n > 0 && v.Runs[n-1].Region == r && v.Runs[n-1].State == run.state && v.Runs[n-1].First+v.Runs[n-1].N == run.lo-base {
				v.Runs[n-1].N += run.hi - run.lo
			} else {
				v.Runs = append(v.Runs, obs.Run{Region: r, First: run.lo - base, N: run.hi - run.lo, State: run.state})
			}
			if run.state != obs.Readable {
				continue
			}
			s := pr.segAt(run.lo)
			for _, g := range m.contentPages(pr, s, run.lo, run.hi) {
				pg, unk := m.expContent(pr, s, g)
				if pg == nil || unk || len(pg.alts[0]) == 0 {
					continue
				}
				w := pg.alts[0]
				d, nz := pageDigest(w)
				v.Pages = append(v.Pages, obs.PageDigest{Region: r, Page: g - base, Digest: d, NonZero: nz})
				for _, x := range w {
					v.Words = append(v.Words, obs.Word{Region: r, Off: uint64(g-base)*prog.PageSize + uint64(x.k)*prog.SlotSize, Value: x.v})
				}
			}
		}
	}
	return v
}

func protString(s *seg) string {
	b := []byte("---p")
	if s.prot >= prog.ProtRead {
		b[0] = 'r'
	}
	if s.prot == prog.ProtRW {
		b[1] = 'w'
	}
	if s.kind.Shared() {
		b[3] = 's'
	}
	return string(b)
}

// lastUnmap finds the last operation in pr's history whose range covers g
// and that can remove a mapping.
func (m *machine) lastUnmap(pr *proc, g int) int {
	best, bestSeq := -1, -1
	for _, j := range m.history(pr.id, g, m.seq) {
		switch m.p.Ops[j].Kind {
		case prog.OpMunmap, prog.OpMremap, prog.OpMmap:
			if m.opSeq[j] > bestSeq {
				best, bestSeq = j, m.opSeq[j]
			}
		}
	}
	return best
}

func (m *machine) originDesc(s *seg) string {
	if s.origin < 0 {
		return s.originWhy
	}
	return fmt.Sprintf("%s, %s", opRef(m.p, s.origin), s.originWhy)
}

// diffWords returns the indexes of the words that differ, in order.
func diffWords(x, y words) []uint16 {
	var out []uint16
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case j >= len(y) || i < len(x) && x[i].k < y[j].k:
			out = append(out, x[i].k)
			i++
		case i >= len(x) || y[j].k < x[i].k:
			out = append(out, y[j].k)
			j++
		default:
			if x[i].v != y[j].v {
				out = append(out, x[i].k)
			}
			i++
			j++
		}
	}
	return out
}

func diffCount(x, y words) int { return len(diffWords(x, y)) }

func hasKey(m map[int]int, k int) bool { _, ok := m[k]; return ok }

func resetName(op *prog.Op) string {
	switch op.Kind {
	case prog.OpMadvise:
		return op.Advice.String()
	case prog.OpMremap:
		return "mremap-dontunmap"
	case prog.OpFork:
		return "wipeonfork"
	}
	return op.Kind.String()
}

// decode decodes a value written by an operation of this program.
func (m *machine) decode(v uint64) (op, k int, ok bool) {
	op, k, ok = prog.DecodeSlotValue(v)
	if !ok || op >= len(m.p.Ops) {
		return 0, 0, false
	}
	if m.p.Ops[op].Kind == prog.OpStoreLoop {
		return op, k, true
	}
	if _, ok := m.slotOffset(op, k); !ok {
		return 0, 0, false
	}
	return op, k, true
}

// valueDesc describes a value and who wrote it, as seen from process v.
func (m *machine) valueDesc(val uint64, v int) string {
	if val == 0 {
		return "0"
	}
	j, k, ok := m.decode(val)
	if !ok {
		return fmt.Sprintf("%#x (no operation of this program writes this value)", val)
	}
	w := m.writer(j)
	when := ""
	switch {
	case m.opSeq[j] < 0:
		when = ", which never ran"
	case w == v:
		when = " by this process"
	default:
		role, f := m.relation(w, v)
		if f >= 0 {
			rel := "after"
			if m.opSeq[j] < m.procs[f+1].forkSeq {
				rel = "before"
			}
			when = fmt.Sprintf(" by the %s (%s) %s fork f%d", role, procName(w), rel, f)
		} else {
			when = " by " + procName(w)
		}
	}
	return fmt.Sprintf("%#x (slot %d of %s%s)", val, k, opRef(m.p, j), when)
}

// history lists (at most 5, latest last) the executed operations that
// touched page g and are part of process v's history, or wrote memory
// that may be shared.
func (m *machine) history(v, g, upto int) []int {
	r, p := regionOf(g)
	type ent struct{ j, seq int }
	var es []ent
	for j := range m.p.Ops {
		op := &m.p.Ops[j]
		if m.opSeq[j] < 0 || m.opSeq[j] > upto {
			continue
		}
		if !m.inherited(j, v) && !(op.Kind == prog.OpPwrite || m.writes[j]&wroteShared != 0) {
			continue
		}
		if touches(op, r, p) {
			es = append(es, ent{j, m.opSeq[j]})
		}
	}
	sort.Slice(es, func(a, b int) bool { return es[a].seq < es[b].seq })
	if len(es) > 5 {
		es = es[len(es)-5:]
	}
	out := make([]int, len(es))
	for k, e := range es {
		out[k] = e.j
	}
	return out
}

// touches reports whether op addresses page p of region r.
func touches(op *prog.Op, r, p int) bool {
	lo := uint64(p) * prog.PageSize
	hi := lo + prog.PageSize
	switch op.Kind {
	case prog.OpStore, prog.OpPwrite, prog.OpProcMem, prog.OpPVWrite, prog.OpStoreLoop:
		if op.Region != r || op.Stride == 0 || op.Off+prog.SlotSize > hi {
			return false
		}
		// first slot k with Off+k*Stride >= lo
		var k uint64
		if op.Off < lo {
			k = (lo - op.Off + op.Stride - 1) / op.Stride
		}
		return k < uint64(op.Count) && op.Off+k*op.Stride < hi
	case prog.OpMremap:
		if op.Region == r && overlaps(op.Off, max(op.Len, op.NewLen), lo, hi) {
			return true
		}
		return op.Flags&prog.MremapFixed != 0 && op.To == r && overlaps(op.ToOff, op.NewLen, lo, hi)
	}
	if op.Kind.HasRange() || op.Kind.HasIORange() {
		return op.Region == r && overlaps(op.Off, op.Len, lo, hi)
	}
	return false
}

func overlaps(off, n, lo, hi uint64) bool {
	end := (off + n + prog.PageSize - 1) &^ (prog.PageSize - 1)
	return off&^(prog.PageSize-1) < hi && end > lo
}
