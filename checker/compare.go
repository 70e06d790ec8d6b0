package checker

// The comparisons: what judges an observation against the reference
// model (model.go and the rule files). A comparer reads the model and
// never changes it; it owns the observation's bookkeeping (which views
// were matched) and writes findings. The model runs the same way when
// it predicts (Expected: no comparer, the predictions go to m.exp) and
// when it judges (Check: m.cmp compares at every view and result).

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// comparer judges observation o of program p against model m.
type comparer struct {
	m   *machine // read only
	p   *prog.Program
	o   *obs.Observation
	col *collector
	// views indexes o's views by (process, point); usedView marks those
	// a process of the model took.
	views    map[viewKey][]int
	usedView []bool
}

func newComparer(m *machine, p *prog.Program, o *obs.Observation) *comparer {
	c := &comparer{m: m, p: p, o: o, col: m.col, views: map[viewKey][]int{}, usedView: make([]bool, len(o.Views))}
	for i, v := range o.Views {
		k := viewKey{v.Proc, v.At}
		c.views[k] = append(c.views[k], i)
	}
	return c
}

// forgetViews marks the views process proc took at point at as matched
// without comparing them (an operation that did not finish may have
// left a partial view).
func (c *comparer) forgetViews(proc, at int) {
	for _, j := range c.views[viewKey{proc, at}] {
		c.usedView[j] = true
	}
}

// view matches the view process pr takes now with one of the
// observation's and compares them.
func (c *comparer) view(pr *proc, at int) {
	vi := -1
	for _, j := range c.views[viewKey{pr.id, at}] {
		if !c.usedView[j] {
			vi = j
			break
		}
	}
	if vi < 0 {
		if !c.o.Truncated {
			kind := "check"
			switch at {
			case obs.AtStart:
				kind = "start"
			case obs.AtEnd:
				kind = "end"
			}
			c.col.add(Finding{Oracle: OracleMissingView, Signature: "missing-view:" + kind, Proc: pr.id, View: -1, At: at, Op: max(at, -1), Region: -1,
				Explanation: fmt.Sprintf("the %s is missing from the observation", viewName(pr.id, at))})
		}
		return
	}
	c.usedView[vi] = true
	c.col.v.Stats.Views++
	c.compareView(pr, at, vi)
}

// errno: operation i of pr returned got where the model predicted pd.
func (c *comparer) errnoFinding(pr *proc, i int, pd pred, got int) {
	var want []string
	for _, e := range pd.errnos {
		want = append(want, errnoName(e))
	}
	c.col.add(Finding{Oracle: OracleErrno, Signature: "errno:" + c.m.opSig(i), Proc: pr.id, View: -1, Op: i, Region: c.m.regionOf(i),
		Explanation: fmt.Sprintf("%s: %s returned %s, expected %s: %s", procName(pr.id), opRef(c.p, i), errnoName(got), strings.Join(want, " or "), pd.why)})
}

func (c *comparer) skippedFinding(pr *proc, i int, want, got int) {
	c.col.add(Finding{Oracle: OracleSkipped, Signature: "skipped:" + c.m.opSig(i), Proc: pr.id, View: -1, Op: i, Region: c.m.regionOf(i),
		Explanation: fmt.Sprintf("%s: %s skipped %d slots, expected %d: the executor skips slots whose page /proc/self/maps shows as not writable or past the end of its object; the model's mappings say %d",
			procName(pr.id), opRef(c.p, i), got, want, want)})
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
func (c *comparer) compareView(pr *proc, at int, vi int) {
	v := &c.o.Views[vi]
	// A view cut short by a full report buffer may miss anything; a view
	// that hit its word cap lacks only words (digests are complete).
	cut := v.Truncated && c.o.Truncated
	// Actual states by region.
	actRuns := make([][]stRun, len(c.p.Regions))
	for _, r := range v.Runs {
		if r.Region < 0 || r.Region >= len(c.p.Regions) || r.N <= 0 || r.First < 0 || r.First >= prog.SpanPages {
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
	for r := range c.p.Regions {
		base := r * prog.SpanPages
		exp := c.m.expRuns(pr, base, base+prog.SpanPages)
		c.compareStates(pr, at, vi, r, exp, actRuns[r], cut)
	}
	c.compareVMAs(pr, at, vi, v)
	// Content: merge the sorted expected content pages with the sorted
	// pages the view shows content of.
	act := actualPages(v, len(c.p.Regions), cut)
	type expPage struct {
		g int
		s *seg
	}
	var exp []expPage
	for r := range c.p.Regions {
		base := r * prog.SpanPages
		for _, run := range c.m.expRuns(pr, base, base+prog.SpanPages) {
			if run.unknown || run.state != obs.Readable {
				continue
			}
			s := pr.segAt(run.lo)
			for _, g := range c.m.contentPages(pr, s, run.lo, run.hi) {
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
				c.comparePage(pr, at, vi, exp[i].s, exp[i].g, empty)
			}
			i++
		case i >= len(exp) || act[j].g < exp[i].g:
			g := act[j].g
			s := pr.segAt(g)
			if s != nil && !s.unknown && actState(g) == obs.Readable && s.prot != prog.ProtNone && !c.m.beyondEOF(s, g) {
				c.comparePage(pr, at, vi, s, g, &act[j])
			}
			j++
		default:
			if actState(exp[i].g) == obs.Readable {
				c.comparePage(pr, at, vi, exp[i].s, exp[i].g, &act[j])
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
func (c *comparer) compareStates(pr *proc, at, vi, region int, exp, act []stRun, cut bool) {
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
		c.mappingFinding(pr, at, vi, region, b.lo, b.hi, b.e, b.a)
	}
}

func stateName(s obs.PageState) string { return s.String() }

func (c *comparer) mappingFinding(pr *proc, at, vi, region, lo, hi int, e, a obs.PageState) {
	base := region * prog.SpanPages
	kind := c.p.Regions[region].Kind
	cause := stateName(e) + "-is-" + stateName(a)
	var why string
	if s := pr.segAt(lo); s != nil {
		kind = s.fullKind()
		why = fmt.Sprintf("the model has a %s %s mapping there (created by %s)", protString(s), kind, c.m.originDesc(s))
		if e == obs.BeyondEOF {
			why += fmt.Sprintf(", past the end of its %d-page object", c.m.objs[s.obj].size)
		}
	} else {
		why = "the model has nothing mapped there"
		for _, h := range pr.holes {
			if lo >= h.start && lo < h.end && at == obs.AtStart {
				cause = "dontfork-" + stateName(a)
				why = fmt.Sprintf("the parent's mapping was MADV_DONTFORK, so fork f%d must leave it out of the child", pr.id-1)
				for _, s := range c.m.procs[pr.parent].segsIn(lo, lo+1) {
					kind = s.kind
				}
			}
		}
		if h := c.m.lastUnmap(pr, lo); h >= 0 {
			why += fmt.Sprintf("; last removed by %s", opRef(c.p, h))
		}
	}
	c.col.add(Finding{Oracle: OracleMapping, Signature: "mapping:" + cause + ":" + kind.String(), Proc: pr.id, View: vi, At: at, Op: -1,
		Region: region, Page: lo - base, Off: uint64(lo-base) * prog.PageSize,
		Explanation: fmt.Sprintf("%s: r%d pages %d..%d (offset %#x, %d pages): expected %s, actual %s; %s",
			viewName(pr.id, at), region, lo-base, hi-1-base, uint64(lo-base)*prog.PageSize, hi-lo, stateName(e), stateName(a), why)})
}

// compareVMAs checks protections, sharing and file offsets of the VMAs.
func (c *comparer) compareVMAs(pr *proc, at, vi int, v *obs.View) {
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
			c.col.add(Finding{Oracle: OracleMapping, Signature: sig, Proc: pr.id, View: vi, At: at, Op: -1, Region: r, Page: pg, Off: uint64(pg) * prog.PageSize,
				Explanation: fmt.Sprintf("%s: VMA %#x-%#x (r%d page %d, %d pages) has %s (mapping created by %s)",
					viewName(pr.id, at), vm.Start, vm.End, r, pg, s.end-s.start, problem, c.m.originDesc(&s))})
		}
	}
}

// comparePage compares one readable page.
func (c *comparer) comparePage(pr *proc, at, vi int, s *seg, g int, a *actualPage) {
	pg, unk := c.m.expContent(pr, s, g)
	if unk {
		return
	}
	c.col.v.Stats.Pages++
	alts := []words{nil}
	if pg != nil {
		alts = pg.alts
	}
	if pg != nil && len(pg.wild) > 0 {
		// Words a thread may write are not judged here, and the others
		// need the page's words.
		if !a.complete {
			c.col.v.Stats.WordsMissing++
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
		o := c.contentOracle(pr, at, s, g, 0, 0)
		c.col.add(Finding{Oracle: o, Signature: string(o) + ":digest:" + s.fullKind().String(), Proc: pr.id, View: vi, At: at, Op: -1, Region: r, Page: p, Off: uint64(p) * prog.PageSize,
			Explanation: fmt.Sprintf("%s: r%d (%s) page %d: digest %#x with %d non-zero words, expected %#x with %d (the view's word list was capped, so only digests can be compared)",
				viewName(pr.id, at), r, s.kind, p, a.digest, a.nonzero, d, nz)})
		return
	}
	for _, k := range diffWords(exp, a.words) {
		c.wordFinding(pr, at, vi, s, g, k, exp.get(k), a.words.get(k), alts)
	}
}

// contentOracle picks the oracle for a content mismatch that is not an
// isolation violation.
func (c *comparer) contentOracle(pr *proc, at int, s *seg, g int, e, a uint64) Oracle {
	sharedish := s.kind.Shared()
	if s.kind == prog.MemfdPrivate {
		if _, ok := pr.anon[g]; !ok {
			sharedish = true
		}
	}
	after := func(v uint64) bool {
		j, _, ok := prog.DecodeSlotValue(v)
		return ok && j < len(c.p.Ops) && c.m.opSeq[j] >= 0 && pr.id > 0 && c.m.opSeq[j] > pr.forkSeq
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
func (c *comparer) wordFinding(pr *proc, at, vi int, s *seg, g int, w uint16, e, a uint64, alts []words) {
	r, p := regionOf(g)
	off := uint64(p)*prog.PageSize + uint64(w)*prog.SlotSize
	var oracle Oracle
	cause := ""
	ja, _, aok := c.m.decode(a)
	je, _, eok := c.m.decode(e)
	privateHere := s.kind == prog.AnonPrivate
	if s.kind == prog.MemfdPrivate {
		_, privateHere = pr.anon[g]
	}
	var isoNote string
	if aok && c.m.writer(ja) != pr.id && c.m.opSeq[ja] >= 0 && c.p.Ops[ja].Kind != prog.OpPwrite && c.p.Ops[ja].Kind != prog.OpStoreLoop &&
		!c.m.inherited(ja, pr.id) && (privateHere || c.m.writes[ja]&wrotePrivate != 0) {
		role, f := c.m.relation(c.m.writer(ja), pr.id)
		oracle = "isolation"
		cause = role + "-" + c.p.Ops[ja].Kind.String() + "-after-fork"
		if f >= 0 {
			isoNote = fmt.Sprintf("; the %s (%s) wrote it after fork f%d separated the two address spaces, into memory that is private to each side", role, procName(c.m.writer(ja)), f)
		}
	} else {
		oracle = c.contentOracle(pr, at, s, g, e, a)
		switch {
		case a == 0 && eok:
			cause = "lost-" + c.p.Ops[je].Kind.String()
		case a == 0:
			cause = "lost-value"
		case e == 0:
			switch {
			case s.originWhy == "MADV_WIPEONFORK at fork" && at == obs.AtStart:
				cause = "wipeonfork-not-zeroed"
			case hasKey(pr.reset, g):
				cause = "not-zeroed-after-" + resetName(&c.p.Ops[pr.reset[g]])
			case aok:
				cause = "unexpected-" + c.p.Ops[ja].Kind.String()
			default:
				cause = "garbage"
			}
		case !aok:
			cause = "garbage"
		case eok && c.m.opSeq[ja] >= 0 && c.m.opSeq[ja] < c.m.opSeq[je]:
			cause = "stale-" + c.p.Ops[ja].Kind.String()
		default:
			cause = "wrong-" + c.p.Ops[ja].Kind.String()
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: r%d (%s) page %d offset %#x (word %d of the page): expected %s, actual %s%s",
		viewName(pr.id, at), r, s.kind, p, off, w, c.m.valueDesc(e, pr.id), c.m.valueDesc(a, pr.id), isoNote)
	if len(alts) > 1 {
		fmt.Fprintf(&b, "; MADV_FREE left %d acceptable contents for this page, none matches", len(alts))
	}
	if hasKey(pr.reset, g) && e == 0 {
		fmt.Fprintf(&b, "; %s discarded the page's private content", opRef(c.p, pr.reset[g]))
	}
	if s.originWhy == "MADV_WIPEONFORK at fork" {
		fmt.Fprintf(&b, "; the mapping is MADV_WIPEONFORK, so %s gave the child zero-filled pages", opRef(c.p, s.origin))
	}
	if h := c.m.history(pr.id, g, c.m.seq); len(h) > 0 {
		b.WriteString("; history of this page: ")
		for k, j := range h {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s by %s", opRef(c.p, j), procName(c.p.Ops[j].Proc))
		}
	}
	c.col.add(Finding{Oracle: oracle, Signature: string(oracle) + ":" + cause + ":" + s.fullKind().String(), Proc: pr.id, View: vi, At: at, Op: ja,
		Region: r, Page: p, Off: off, Expected: e, Actual: a, Explanation: b.String()})
}

// threads runs the consistent-cut search over the threads' store logs
// (cut.go) when the program has threads.
func (c *comparer) threads() {
	if !c.m.hasThreads() {
		return
	}
	dropped := 0
	for _, tl := range c.o.Threads {
		dropped += tl.Dropped
	}
	if dropped > 0 {
		// The cut search needs every store of the history: the check
		// is undecided, which is never a pass.
		c.col.add(Finding{Oracle: OracleLinUnknown, Signature: "linearizability-unknown:log-overflow", View: -1, Op: -1, Region: -1,
			Explanation: fmt.Sprintf("threads dropped %d stores from their logs (capacity exceeded): the consistent-cut oracle could not judge the child snapshots", dropped)})
		return
	}
	// An undecided search (porcupine's timeout or memory cap) is a
	// finding of its own kind: never a pass.
	cc := newConcurrency(c.p)
	c.col.v.Stats.Cells = len(judgedCells(c.p, cc))
	fs, missing := cutFindings(c.p, c.o, cc, cutTimeout)
	c.col.v.Stats.WordsMissing += missing
	for _, f := range fs {
		c.col.add(f)
	}
}

// unmatchedViews: every view of the observation no process of the model
// took is a finding.
func (c *comparer) unmatchedViews() {
	m := c.m
	for vi, used := range c.usedView {
		if used || m.racyFault {
			// After the main process stopped racily (a thread changed
			// its mappings under it), children it had released may have
			// taken views the model never reached.
			continue
		}
		v := &c.o.Views[vi]
		why := "no process of the program takes this view"
		if v.Proc > 0 && v.Proc < len(m.procs) {
			switch {
			case m.procs[v.Proc].state == forkFailed:
				why = "the fork that would create the process failed"
			case m.procs[v.Proc].copyKilled:
				why = "the process " + m.killedHow(v.Proc-1)
			case m.killOp(v.Proc-1) >= 0:
				why = fmt.Sprintf("the process was killed by %s before it was released", opRef(c.p, m.killOp(v.Proc-1)))
			}
		}
		if len(c.views[viewKey{v.Proc, v.At}]) > 1 {
			why = "the view appears more than once"
		}
		c.col.add(Finding{Oracle: OracleUnexpectedView, Signature: "unexpected-view", Proc: v.Proc, View: vi, At: v.At, Op: -1, Region: -1,
			Explanation: fmt.Sprintf("the observation has a %s, but %s", viewName(v.Proc, v.At), why)})
	}
}
