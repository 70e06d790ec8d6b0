package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// view handles a view that process pr takes now.
func (m *machine) view(pr *proc, at int) {
	if !m.checking() {
		m.exp.Views = append(m.exp.Views, m.expectedView(pr, at))
		return
	}
	if m.spec != nil {
		m.spec.view(m, pr, at)
	}
	vi := -1
	for _, j := range m.views[viewKey{pr.id, at}] {
		if !m.usedView[j] {
			vi = j
			break
		}
	}
	if vi < 0 {
		if !m.o.Truncated {
			kind := "check"
			switch at {
			case obs.AtStart:
				kind = "start"
			case obs.AtEnd:
				kind = "end"
			}
			m.col.add(Finding{Oracle: OracleMissingView, Signature: "missing-view:" + kind, Proc: pr.id, View: -1, At: at, Op: max(at, -1), Region: -1,
				Explanation: fmt.Sprintf("the %s is missing from the observation", viewName(pr.id, at))})
		}
		return
	}
	m.usedView[vi] = true
	m.col.v.Stats.Views++
	m.compareView(pr, at, vi)
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

// actualPage is what a view shows of one page.
type actualPage struct {
	g        int
	words    words
	digest   uint64
	nonzero  int
	hasDig   bool
	complete bool
}

// compareView checks view vi of the observation against pr's state.
func (m *machine) compareView(pr *proc, at int, vi int) {
	v := &m.o.Views[vi]
	// A view cut short by a full report buffer may miss anything; a view
	// that hit its word cap lacks only words (digests are complete).
	cut := v.Truncated && m.o.Truncated
	// Actual states by region.
	actRuns := make([][]stRun, len(m.p.Regions))
	for _, r := range v.Runs {
		if r.Region < 0 || r.Region >= len(m.p.Regions) || r.N <= 0 || r.First < 0 || r.First >= prog.SpanPages {
			continue
		}
		base := r.Region * prog.SpanPages
		actRuns[r.Region] = append(actRuns[r.Region], stRun{lo: base + r.First, hi: base + min(r.First+r.N, prog.SpanPages), state: r.State})
	}
	for r := range actRuns {
		sort.Slice(actRuns[r], func(a, b int) bool { return actRuns[r][a].lo < actRuns[r][b].lo })
	}
	actState := func(g int) obs.PageState {
		r := g / prog.SpanPages
		if r >= len(actRuns) {
			return 0
		}
		runs := actRuns[r]
		j := sort.Search(len(runs), func(j int) bool { return runs[j].hi > g })
		if j < len(runs) && runs[j].lo <= g {
			return runs[j].state
		}
		return 0
	}
	// Page states.
	for r := range m.p.Regions {
		base := r * prog.SpanPages
		exp := m.expRuns(pr, base, base+prog.SpanPages)
		m.compareStates(pr, at, vi, r, exp, actRuns[r], cut)
	}
	m.compareVMAs(pr, at, vi, v)
	// Content: merge the sorted expected content pages with the sorted
	// pages the view shows content of.
	act := actualPages(v, len(m.p.Regions), cut)
	type expPage struct {
		g int
		s *seg
	}
	var exp []expPage
	for r := range m.p.Regions {
		base := r * prog.SpanPages
		for _, run := range m.expRuns(pr, base, base+prog.SpanPages) {
			if run.unknown || run.state != obs.Readable {
				continue
			}
			s := pr.segAt(run.lo)
			for _, g := range m.contentPages(pr, s, run.lo, run.hi) {
				exp = append(exp, expPage{g, s})
			}
		}
	}
	empty := &actualPage{complete: !cut}
	i, j := 0, 0
	for i < len(exp) || j < len(act) {
		switch {
		case j >= len(act) || i < len(exp) && exp[i].g < act[j].g:
			if actState(exp[i].g) == obs.Readable {
				m.comparePage(pr, at, vi, exp[i].s, exp[i].g, empty)
			}
			i++
		case i >= len(exp) || act[j].g < exp[i].g:
			g := act[j].g
			s := pr.segAt(g)
			if s != nil && !s.unknown && actState(g) == obs.Readable && s.prot != prog.ProtNone && !m.beyondEOF(s, g) {
				m.comparePage(pr, at, vi, s, g, &act[j])
			}
			j++
		default:
			if actState(exp[i].g) == obs.Readable {
				m.comparePage(pr, at, vi, exp[i].s, exp[i].g, &act[j])
			}
			i++
			j++
		}
	}
}

// actualPages groups a view's words and digests by page, sorted by global
// page.
func actualPages(v *obs.View, nregions int, cut bool) []actualPage {
	out := make([]actualPage, 0, len(v.Pages)+1)
	var idx map[int]int // only when the view is not in address order
	sorted := true
	get := func(g int) *actualPage {
		n := len(out)
		if n > 0 && out[n-1].g == g {
			return &out[n-1]
		}
		if n == 0 || out[n-1].g < g && idx == nil {
			out = append(out, actualPage{g: g})
			return &out[n]
		}
		if idx == nil {
			idx = make(map[int]int, n)
			for k := range out {
				idx[out[k].g] = k
			}
		}
		if k, ok := idx[g]; ok {
			return &out[k]
		}
		if out[n-1].g > g {
			sorted = false
		}
		idx[g] = n
		out = append(out, actualPage{g: g})
		return &out[n]
	}
	for _, w := range v.Words {
		if w.Region < 0 || w.Region >= nregions || w.Off >= prog.SpanBytes || w.Value == 0 {
			continue
		}
		a := get(w.Region*prog.SpanPages + int(w.Off/prog.PageSize))
		k := uint16(w.Off % prog.PageSize / prog.SlotSize)
		if n := len(a.words); n == 0 || a.words[n-1].k < k {
			a.words = append(a.words, wv{k, w.Value})
		} else {
			a.words.set(k, w.Value)
		}
	}
	for _, d := range v.Pages {
		if d.Region < 0 || d.Region >= nregions || d.Page < 0 || d.Page >= prog.SpanPages {
			continue
		}
		a := get(d.Region*prog.SpanPages + d.Page)
		a.digest, a.nonzero, a.hasDig = d.Digest, d.NonZero, true
	}
	if !sorted {
		sort.Slice(out, func(a, b int) bool { return out[a].g < out[b].g })
	}
	for k := range out {
		a := &out[k]
		switch {
		case !v.Truncated:
			a.complete = true
		case a.hasDig:
			a.complete = len(a.words) == a.nonzero
		default:
			a.complete = len(a.words) == 0 && !cut
		}
	}
	return out
}

// compareStates compares expected and actual page states of one region.
func (m *machine) compareStates(pr *proc, at, vi, region int, exp, act []stRun, cut bool) {
	var pts []int
	for _, r := range exp {
		pts = append(pts, r.lo, r.hi)
	}
	for _, r := range act {
		pts = append(pts, r.lo, r.hi)
	}
	sort.Ints(pts)
	pts = uniq(pts)
	lookup := func(runs []stRun, g int) (obs.PageState, bool) {
		j := sort.Search(len(runs), func(j int) bool { return runs[j].hi > g })
		if j < len(runs) && runs[j].lo <= g {
			return runs[j].state, runs[j].unknown
		}
		return 0, false
	}
	type bad struct {
		lo, hi int
		e, a   obs.PageState
	}
	var bads []bad
	for k := 0; k+1 < len(pts); k++ {
		x, y := pts[k], pts[k+1]
		e, unk := lookup(exp, x)
		a, _ := lookup(act, x)
		if unk || e == a || cut && a == 0 {
			continue
		}
		if n := len(bads); n > 0 && bads[n-1].hi == x && bads[n-1].e == e && bads[n-1].a == a {
			bads[n-1].hi = y
			continue
		}
		bads = append(bads, bad{x, y, e, a})
	}
	for _, b := range bads {
		m.mappingFinding(pr, at, vi, region, b.lo, b.hi, b.e, b.a)
	}
}

func stateName(s obs.PageState) string { return s.String() }

func (m *machine) mappingFinding(pr *proc, at, vi, region, lo, hi int, e, a obs.PageState) {
	base := region * prog.SpanPages
	kind := m.p.Regions[region].Kind
	cause := stateName(e) + "-is-" + stateName(a)
	var why string
	if s := pr.segAt(lo); s != nil {
		kind = s.fullKind()
		why = fmt.Sprintf("the model has a %s %s mapping there (created by %s)", protString(s), kind, m.originDesc(s))
		if e == obs.BeyondEOF {
			why += fmt.Sprintf(", past the end of its %d-page object", m.objs[s.obj].size)
		}
	} else {
		why = "the model has nothing mapped there"
		for _, h := range pr.holes {
			if lo >= h.start && lo < h.end && at == obs.AtStart {
				cause = "dontfork-" + stateName(a)
				why = fmt.Sprintf("the parent's mapping was MADV_DONTFORK, so fork f%d must leave it out of the child", pr.id-1)
				for _, s := range m.procs[pr.parent].segsIn(lo, lo+1) {
					kind = s.kind
				}
			}
		}
		if h := m.lastUnmap(pr, lo); h >= 0 {
			why += fmt.Sprintf("; last removed by %s", opRef(m.p, h))
		}
	}
	m.col.add(Finding{Oracle: OracleMapping, Signature: "mapping:" + cause + ":" + kind.String(), Proc: pr.id, View: vi, At: at, Op: -1,
		Region: region, Page: lo - base, Off: uint64(lo-base) * prog.PageSize,
		Explanation: fmt.Sprintf("%s: r%d pages %d..%d (offset %#x, %d pages): expected %s, actual %s; %s",
			viewName(pr.id, at), region, lo-base, hi-1-base, uint64(lo-base)*prog.PageSize, hi-lo, stateName(e), stateName(a), why)})
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

// compareVMAs checks protections, sharing and file offsets of the VMAs.
func (m *machine) compareVMAs(pr *proc, at, vi int, v *obs.View) {
	for _, vm := range v.VMAs {
		lo, ok1 := addrPage(vm.Start)
		hi, ok2 := addrPage(vm.End - 1)
		if !ok1 || !ok2 || vm.End <= vm.Start || len(vm.Prot) < 4 {
			continue
		}
		hi++
		for _, s := range pr.segsIn(lo, hi) {
			if s.unknown {
				continue
			}
			want := protString(&s)
			got := vm.Prot[:2] + "-" + vm.Prot[3:4]
			var problem string
			switch {
			case want != got:
				problem = fmt.Sprintf("protection %s, expected %s", vm.Prot, want)
			case s.obj >= 0 && vm.Offset/prog.PageSize+uint64(s.start-lo) != uint64(s.pgoff):
				problem = fmt.Sprintf("file offset %#x at page %d, expected %#x", (vm.Offset/prog.PageSize+uint64(s.start-lo))*prog.PageSize, s.start-lo, uint64(s.pgoff)*prog.PageSize)
			default:
				continue
			}
			r, pg := regionOf(s.start)
			sig := "mapping:vma-prot:" + s.fullKind().String()
			if want == got {
				sig = "mapping:vma-offset:" + s.fullKind().String()
			}
			m.col.add(Finding{Oracle: OracleMapping, Signature: sig, Proc: pr.id, View: vi, At: at, Op: -1, Region: r, Page: pg, Off: uint64(pg) * prog.PageSize,
				Explanation: fmt.Sprintf("%s: VMA %#x-%#x (r%d page %d, %d pages) has %s (mapping created by %s)",
					viewName(pr.id, at), vm.Start, vm.End, r, pg, s.end-s.start, problem, m.originDesc(&s))})
		}
	}
}

func (m *machine) originDesc(s *seg) string {
	if s.origin < 0 {
		return s.originWhy
	}
	return fmt.Sprintf("%s, %s", opRef(m.p, s.origin), s.originWhy)
}

// comparePage compares one readable page.
func (m *machine) comparePage(pr *proc, at, vi int, s *seg, g int, a *actualPage) {
	pg, unk := m.expContent(pr, s, g)
	if unk {
		return
	}
	m.col.v.Stats.Pages++
	alts := []words{nil}
	if pg != nil {
		alts = pg.alts
	}
	if pg != nil && len(pg.wild) > 0 {
		// Words a thread may write are not judged here.
		if !a.complete {
			return
		}
		aw := a.words.without(pg.wild)
		var fa []words
		for _, w := range alts {
			fa = append(fa, w.without(pg.wild))
		}
		alts = fa
		a = &actualPage{words: aw, complete: true}
	}
	best, bestDiff := 0, -1
	for k, w := range alts {
		if a.complete {
			if w.equal(a.words) {
				return
			}
			d := diffCount(w, a.words)
			if bestDiff < 0 || d < bestDiff {
				best, bestDiff = k, d
			}
		} else {
			d, nz := pageDigest(w)
			if !a.hasDig && nz == 0 || a.hasDig && d == a.digest && nz == a.nonzero {
				return
			}
		}
	}
	exp := alts[best]
	if !a.complete {
		// Only the digest is known: compare the words we have and
		// report the page.
		r, p := regionOf(g)
		d, nz := pageDigest(exp)
		o := m.contentOracle(pr, at, s, g, 0, 0)
		m.col.add(Finding{Oracle: o, Signature: string(o) + ":digest:" + s.fullKind().String(), Proc: pr.id, View: vi, At: at, Op: -1, Region: r, Page: p, Off: uint64(p) * prog.PageSize,
			Explanation: fmt.Sprintf("%s: r%d (%s) page %d: digest %#x with %d non-zero words, expected %#x with %d (the view's word list was capped, so only digests can be compared)",
				viewName(pr.id, at), r, s.kind, p, a.digest, a.nonzero, d, nz)})
		return
	}
	for _, k := range diffWords(exp, a.words) {
		m.wordFinding(pr, at, vi, s, g, k, exp.get(k), a.words.get(k), alts)
	}
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

// contentOracle picks the oracle for a content mismatch that is not an
// isolation violation.
func (m *machine) contentOracle(pr *proc, at int, s *seg, g int, e, a uint64) Oracle {
	sharedish := s.kind.Shared()
	if s.kind == prog.MemfdPrivate {
		if _, ok := pr.anon[g]; !ok {
			sharedish = true
		}
	}
	after := func(v uint64) bool {
		j, _, ok := prog.DecodeSlotValue(v)
		return ok && j < len(m.p.Ops) && m.opSeq[j] >= 0 && pr.id > 0 && m.opSeq[j] > pr.forkSeq
	}
	if sharedish && (at != obs.AtStart || after(e) || after(a)) {
		return "shared"
	}
	if at == obs.AtStart {
		return "snapshot"
	}
	if sharedish {
		return "shared"
	}
	return "memory"
}

// wordFinding reports one mismatching word.
func (m *machine) wordFinding(pr *proc, at, vi int, s *seg, g int, w uint16, e, a uint64, alts []words) {
	r, p := regionOf(g)
	off := uint64(p)*prog.PageSize + uint64(w)*prog.SlotSize
	var oracle Oracle
	cause := ""
	ja, _, aok := m.decode(a)
	je, _, eok := m.decode(e)
	privateHere := s.kind == prog.AnonPrivate
	if s.kind == prog.MemfdPrivate {
		_, privateHere = pr.anon[g]
	}
	var isoNote string
	if aok && m.writer(ja) != pr.id && m.opSeq[ja] >= 0 && m.p.Ops[ja].Kind != prog.OpPwrite && m.p.Ops[ja].Kind != prog.OpStoreLoop &&
		!m.inherited(ja, pr.id) && (privateHere || m.writes[ja]&wrotePrivate != 0) {
		role, f := m.relation(m.writer(ja), pr.id)
		oracle = "isolation"
		cause = role + "-" + m.p.Ops[ja].Kind.String() + "-after-fork"
		if f >= 0 {
			isoNote = fmt.Sprintf("; the %s (%s) wrote it after fork f%d separated the two address spaces, into memory that is private to each side", role, procName(m.writer(ja)), f)
		}
	} else {
		oracle = m.contentOracle(pr, at, s, g, e, a)
		switch {
		case a == 0 && eok:
			cause = "lost-" + m.p.Ops[je].Kind.String()
		case a == 0:
			cause = "lost-value"
		case e == 0:
			switch {
			case s.originWhy == "MADV_WIPEONFORK at fork" && at == obs.AtStart:
				cause = "wipeonfork-not-zeroed"
			case hasKey(pr.reset, g):
				cause = "not-zeroed-after-" + resetName(&m.p.Ops[pr.reset[g]])
			case aok:
				cause = "unexpected-" + m.p.Ops[ja].Kind.String()
			default:
				cause = "garbage"
			}
		case !aok:
			cause = "garbage"
		case eok && m.opSeq[ja] >= 0 && m.opSeq[ja] < m.opSeq[je]:
			cause = "stale-" + m.p.Ops[ja].Kind.String()
		default:
			cause = "wrong-" + m.p.Ops[ja].Kind.String()
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: r%d (%s) page %d offset %#x (word %d of the page): expected %s, actual %s%s",
		viewName(pr.id, at), r, s.kind, p, off, w, m.valueDesc(e, pr.id), m.valueDesc(a, pr.id), isoNote)
	if len(alts) > 1 {
		fmt.Fprintf(&b, "; MADV_FREE left %d acceptable contents for this page, none matches", len(alts))
	}
	if hasKey(pr.reset, g) && e == 0 {
		fmt.Fprintf(&b, "; %s discarded the page's private content", opRef(m.p, pr.reset[g]))
	}
	if s.originWhy == "MADV_WIPEONFORK at fork" {
		fmt.Fprintf(&b, "; the mapping is MADV_WIPEONFORK, so %s gave the child zero-filled pages", opRef(m.p, s.origin))
	}
	if h := m.history(pr.id, g, m.seq); len(h) > 0 {
		b.WriteString("; history of this page: ")
		for k, j := range h {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s by %s", opRef(m.p, j), procName(m.p.Ops[j].Proc))
		}
	}
	m.col.add(Finding{Oracle: oracle, Signature: string(oracle) + ":" + cause + ":" + s.fullKind().String(), Proc: pr.id, View: vi, At: at, Op: ja,
		Region: r, Page: p, Off: off, Expected: e, Actual: a, Explanation: b.String()})
}

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
