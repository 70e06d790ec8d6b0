package checker

import (
	"fmt"
	"sort"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Spec is what the reference model accepts of a run of a program that
// follows the model's expected schedule (Expected): for every operation
// the errnos it may return, for every view the page states, protections
// and contents it may show, with the model's doubts made explicit
// (unknown ranges, MADV_FREE alternatives, words a thread may write). It
// is what a standalone reproducer (campaign/reproc) checks a run against
// without the model.
//
// It is computed by judging the expected observation itself: the model
// runs in checking mode over Expected(p), so every doubt it has when
// judging a real run that took the expected path is recorded.
type Spec struct {
	// Expected is Expected(p) (with Kernel set as asked).
	Expected *obs.Observation
	// Ops has one entry per operation.
	Ops []OpSpec
	// Views are the views the model takes, in the order it takes them.
	Views []ViewSpec
	// Pipes holds, for every readpipe operation the model judges, what
	// the pipe holds (keyed by op index).
	Pipes map[int][]PipePageSpec
	// Findings are the model's findings about the expected observation
	// itself (there should be none; a reproducer must not be built then).
	Findings []Finding
}

// OpSpec is the errno prediction of one operation.
type OpSpec struct {
	// Judged is false for operations the model never runs (in a killed
	// child, after a failed fork).
	Judged bool
	// Errnos are the acceptable errnos; empty: any.
	Errnos []int
	Why    string
	// SkippedJudged: the model judges the count of skipped slots of this
	// store, procmem or pvwrite (it is Skipped).
	SkippedJudged bool
	Skipped       int
}

// ViewSpec is what one view may show.
type ViewSpec struct {
	Proc, At int
	// Segs are the model's mappings inside program regions, sorted;
	// pages not in any segment must be unmapped.
	Segs []SegSpec
	// Pages lists the pages whose content is not simply "zero, or unknown
	// by the segment's ContentUnknown"; sorted by region, page.
	Pages []PageSpec
}

// SegSpec is one model segment (clipped to a region span).
type SegSpec struct {
	Region, First, N int // pages [First, First+N) of the region
	// Unknown: the model lost track; any state and content.
	Unknown bool
	// Readable is how many leading pages are inside the backing object
	// (the rest are beyond EOF); State is NoAccess for PROT_NONE.
	Readable int
	State    obs.PageState
	// Prot is "rw-s" style: r, w and s (the x column is not judged).
	Prot string
	// FileOffset is the file offset of page First (-1 for anonymous
	// private mappings).
	FileOffset int64
	// ContentUnknown: readable pages not listed in Pages hold unknown
	// content (the model lost track of shared memory); otherwise zero.
	ContentUnknown bool
}

// PageSpec is the content one page may have.
type PageSpec struct {
	Region, Page int
	Unknown      bool
	// Alts are the acceptable contents (non-zero words); one of them
	// must match exactly, ignoring Wild words.
	Alts [][]WordVal
	Wild []uint16
}

// WordVal is one non-zero word of a page.
type WordVal struct {
	K uint16 // word index 0..511
	V uint64
}

// PipePageSpec is one page a readpipe reads: per word, the values it may
// hold (Wild: any); words not listed must be zero... or one of Extra.
type PipePageSpec struct {
	Unknown bool
	Alts    [][]WordVal
	Wild    []uint16
	// Extra are further acceptable (word, value) pairs: later writes that
	// may show through the pipe.
	Extra []WordVal
}

// recorder is told what the model accepts at each judged point: a
// *specRec for NewSpec, noRecord for every other run.
type recorder interface {
	op(i int, pd pred)
	skipped(i int, judged bool, n int)
	view(m *machine, pr *proc, at int)
	pipe(m *machine, i int, pages []pipePage, lost bool)
}

// noRecord records nothing.
type noRecord struct{}

func (noRecord) op(int, pred)                         {}
func (noRecord) skipped(int, bool, int)               {}
func (noRecord) view(*machine, *proc, int)            {}
func (noRecord) pipe(*machine, int, []pipePage, bool) {}

// specRec collects a Spec while the model runs.
type specRec struct {
	s *Spec
}

// NewSpec computes the Spec of p for a kernel of release kernel (uname -r;
// empty: the newest behaviour the model knows). It returns an error for
// invalid programs.
func NewSpec(p *prog.Program, kernel string) (*Spec, error) {
	return NewSpecFailing(p, kernel, -1)
}

// NewSpecFailing is NewSpec for the run in which fork operation failOp
// (one with fault injection or a memory-cgroup limit) fails with ENOMEM
// and every other fork succeeds (failOp < 0: none fails).
func NewSpecFailing(p *prog.Program, kernel string, failOp int) (*Spec, error) {
	return newSpec(p, kernel, func(em *machine) error {
		if failOp >= 0 && (failOp >= len(p.Ops) || p.Ops[failOp].Kind != prog.OpFork) {
			return fmt.Errorf("op %d is not a fork", failOp)
		}
		em.failFork = failOp + 1
		return nil
	})
}

// NewSpecCopyKilled is NewSpec for the run in which the child of fork
// operation forkOp (one with childfail or child_oom) dies on its way to
// user space, killed with SIGKILL after the fault injected into its side
// of the fork or by its memory cgroup's OOM killer (Async-fork's contract
// for a failed copy): it never runs, its wait reports SIGKILL, and every
// other fork succeeds.
func NewSpecCopyKilled(p *prog.Program, kernel string, forkOp int) (*Spec, error) {
	return newSpec(p, kernel, func(em *machine) error {
		if forkOp < 0 || forkOp >= len(p.Ops) || p.Ops[forkOp].Kind != prog.OpFork {
			return fmt.Errorf("op %d is not a fork", forkOp)
		}
		em.copyKill = forkOp + 1
		return nil
	})
}

// newSpec runs the model in expected mode (set up by setup), then checks
// that expected run against itself, recording what it accepts.
func newSpec(p *prog.Program, kernel string, setup func(*machine) error) (*Spec, error) {
	if p == nil {
		return nil, fmt.Errorf("no program")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	em := newMachine(p, nil)
	em.kernel = kernel
	if err := setup(em); err != nil {
		return nil, err
	}
	em.run()
	exp := em.exp
	exp.Kernel = kernel
	s := &Spec{Expected: exp, Ops: make([]OpSpec, len(p.Ops)), Pipes: map[int][]PipePageSpec{}}
	m := newMachine(p, exp)
	m.spec = &specRec{s: s}
	m.col.excuse = newInjectedExcuses(p, exp)
	m.run()
	s.Findings = append(s.Findings, m.col.v.Findings...)
	return s, nil
}

// op records the prediction for operation i.
func (r *specRec) op(i int, pd pred) {
	r.s.Ops[i] = OpSpec{Judged: true, Errnos: append([]int(nil), pd.errnos...), Why: pd.why}
}

// skipped records whether the skipped slots of operation i are judged.
func (r *specRec) skipped(i int, judged bool, n int) {
	r.s.Ops[i].SkippedJudged, r.s.Ops[i].Skipped = judged, n
}

func wordVals(w words) []WordVal {
	out := make([]WordVal, len(w))
	for i, x := range w {
		out[i] = WordVal{x.k, x.v}
	}
	return out
}

func wildList(w map[uint16]bool) []uint16 {
	var out []uint16
	for k := range w {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// view records what process pr's view at may show.
func (r *specRec) view(m *machine, pr *proc, at int) {
	v := ViewSpec{Proc: pr.id, At: at}
	for reg := range m.p.Regions {
		base := reg * prog.SpanPages
		for _, s := range pr.segsIn(base, base+prog.SpanPages) {
			ss := SegSpec{Region: reg, First: s.start - base, N: s.end - s.start, Unknown: s.unknown, FileOffset: -1}
			if !s.unknown {
				ss.Prot = protString(&s)
				ss.Readable = ss.N
				ss.State = obs.Readable
				if s.prot == prog.ProtNone {
					ss.State = obs.NoAccess
				}
				if s.obj >= 0 {
					ss.FileOffset = int64(s.pgoff) * prog.PageSize
					ss.Readable = min(ss.N, max(0, m.objs[s.obj].size-s.pgoff))
				}
				ss.ContentUnknown = m.taintShared && (s.kind.Shared() || s.kind == prog.MemfdPrivate)
			}
			v.Segs = append(v.Segs, ss)
			if s.unknown || s.prot == prog.ProtNone {
				continue
			}
			hi := s.start + ss.Readable
			for _, g := range m.contentPages(pr, &s, s.start, hi) {
				pg, unk := m.expContent(pr, &s, g)
				ps := PageSpec{Region: reg, Page: g - base, Unknown: unk}
				switch {
				case unk:
				case pg == nil:
					ps.Alts = [][]WordVal{nil}
				default:
					for _, a := range pg.alts {
						ps.Alts = append(ps.Alts, wordVals(a))
					}
					ps.Wild = wildList(pg.wild)
				}
				v.Pages = append(v.Pages, ps)
			}
		}
	}
	r.s.Views = append(r.s.Views, v)
}

// pipe records what readpipe op i reads.
func (r *specRec) pipe(m *machine, i int, pages []pipePage, lost bool) {
	if lost {
		return
	}
	var out []PipePageSpec
	for _, pp := range pages {
		ps := PipePageSpec{Unknown: pp.unknown, Wild: wildList(pp.wild)}
		for _, a := range pp.alts {
			ps.Alts = append(ps.Alts, wordVals(a))
		}
		// Later writes that may show through: try every value any
		// operation of the program writes.
		seen := map[WordVal]bool{}
		for j := range m.p.Ops {
			op := &m.p.Ops[j]
			try := func(k int, off uint64) {
				w := uint16(off % prog.PageSize / prog.SlotSize)
				wv := WordVal{w, prog.SlotValue(j, k)}
				if !seen[wv] && !inAlts(pp.alts, w, wv.V) && m.pipeAccepts(&pp, w, wv.V, i) {
					seen[wv] = true
					ps.Extra = append(ps.Extra, wv)
				}
			}
			switch {
			case op.Kind == prog.OpStoreLoop:
				// Any pass may show: the word is wild if pass 0 may.
				op.SlotOffsets(func(k int, off uint64) {
					w := uint16(off % prog.PageSize / prog.SlotSize)
					if m.pipeAccepts(&pp, w, prog.SlotValue(j, k), i) {
						ps.Wild = append(ps.Wild, w)
					}
				})
			case op.Kind.WritesSlots():
				op.SlotOffsets(try)
			case op.Kind == prog.OpODirect || op.Kind == prog.OpUringRead:
				for off := uint64(0); off < op.Len; off += prog.SlotSize {
					try(int(off/prog.SlotSize), op.Off+off)
				}
			}
		}
		out = append(out, ps)
	}
	r.s.Pipes[i] = out
}

// inAlts reports whether word w is v in one of the alternatives.
func inAlts(alts []words, w uint16, v uint64) bool {
	for _, a := range alts {
		if a.get(w) == v {
			return true
		}
	}
	return false
}
