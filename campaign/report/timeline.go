package report

import (
	"fmt"
	"sort"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// MaxTimelineEvents bounds the columns of a timeline.
var MaxTimelineEvents = 400

// lane is one row of the timeline: a process's main thread or a thread of
// the main process.
type lane struct {
	proc, thread int
	label        string
	depth        int
}

// procLabel names a process: "main", "f0 (child of main)", "f3 (child of f0)".
func procLabel(p *prog.Program, proc int) string {
	if proc == 0 {
		return "main"
	}
	f := proc - 1
	parent := "main"
	if fi := p.ForkOp(f); fi >= 0 && p.Ops[fi].Proc > 0 {
		parent = fmt.Sprintf("f%d", p.Ops[fi].Proc-1)
	}
	return fmt.Sprintf("f%d (child of %s)", f, parent)
}

// lanes lists the main thread, the main process's threads, then the
// children depth first in the order they were forked.
func lanes(p *prog.Program) []lane {
	out := []lane{{proc: 0, label: "main"}}
	threads := map[int]bool{}
	for _, op := range p.Ops {
		if op.Proc == 0 && op.Thread > 0 {
			threads[op.Thread] = true
		}
	}
	var ts []int
	for t := range threads {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	for _, t := range ts {
		out = append(out, lane{proc: 0, thread: t, label: fmt.Sprintf("main t%d", t), depth: 1})
	}
	var walk func(proc, depth int)
	walk = func(proc, depth int) {
		for _, op := range p.Ops {
			if op.Kind == prog.OpFork && op.Proc == proc && op.Thread == 0 {
				child := op.Fork + 1
				out = append(out, lane{proc: child, label: procLabel(p, child), depth: depth})
				walk(child, depth+1)
			}
		}
	}
	walk(0, 1)
	return out
}

// event is one column of the timeline: an operation or a view.
type event struct {
	op   int // operation index, or -1 for a view
	view int // view index, or -1
	key  int64
	seq  int
}

// order puts operations in the order they ran (their start times; ones
// that did not run follow the operation before them in program order) and
// inserts each view where it was taken.
func order(p *prog.Program, o *obs.Observation) []event {
	var evs []event
	var last int64
	for i := range p.Ops {
		k := last
		if o != nil && i < len(o.Ops) && o.Ops[i].Ran {
			k = o.Ops[i].Start
			last = k
		}
		evs = append(evs, event{op: i, view: -1, key: k, seq: i})
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].key < evs[b].key })
	if o == nil {
		return evs
	}
	// Views go right after their check, before a child's first operation
	// (or right after the wait that let it run), or at the end.
	pos := func(op int) int {
		for j, e := range evs {
			if e.op == op {
				return j
			}
		}
		return len(evs)
	}
	type ins struct {
		at, view int
	}
	var inserts []ins
	for vi, v := range o.Views {
		at := len(evs)
		switch {
		case v.At >= 0:
			at = pos(v.At) + 1
		case v.At == obs.AtStart && v.Proc > 0:
			first := -1
			for j, e := range evs {
				if e.op >= 0 && p.Ops[e.op].Proc == v.Proc {
					first = j
					break
				}
			}
			if first >= 0 {
				at = first
			} else {
				for i, op := range p.Ops {
					if op.Kind == prog.OpWait && op.Fork == v.Proc-1 {
						at = pos(i) + 1
						break
					}
				}
			}
		}
		inserts = append(inserts, ins{at, vi})
	}
	sort.SliceStable(inserts, func(a, b int) bool { return inserts[a].at < inserts[b].at })
	out := make([]event, 0, len(evs)+len(inserts))
	k := 0
	for j := 0; j <= len(evs); j++ {
		for k < len(inserts) && inserts[k].at == j {
			out = append(out, event{op: -1, view: inserts[k].view})
			k++
		}
		if j < len(evs) {
			out = append(out, evs[j])
		}
	}
	return out
}

var opAbbrev = map[prog.OpKind]string{
	prog.OpStore: "S", prog.OpPwrite: "pw", prog.OpMmap: "mm", prog.OpMunmap: "un", prog.OpMprotect: "pr",
	prog.OpMadvise: "ad", prog.OpMremap: "re", prog.OpMlock: "lk", prog.OpMunlock: "ul", prog.OpFork: "F",
	prog.OpWait: "W", prog.OpKill: "K", prog.OpCheck: "C", prog.OpStoreLoop: "L", prog.OpJoin: "J",
	prog.OpProcMem: "pm", prog.OpPVWrite: "pv", prog.OpODirect: "od", prog.OpVmsplice: "vs", prog.OpReadPipe: "rp",
	prog.OpUringReg: "ur", prog.OpUringRead: "ud", prog.OpUffdWP: "uf", prog.OpMigrate: "mg", prog.OpMigrateLoop: "ML",
	prog.OpMlockOnfault: "lf", prog.OpMbind: "mb", prog.OpAnonName: "an", prog.OpPMadvise: "pa", prog.OpRemapFile: "rf",
	prog.OpUffdReg: "um", prog.OpUffdUnreg: "uU",
}

func opColor(k prog.OpKind) string {
	switch k {
	case prog.OpStore, prog.OpPwrite, prog.OpStoreLoop, prog.OpProcMem, prog.OpPVWrite:
		return "#4a90d9"
	case prog.OpFork:
		return "#27ae60"
	case prog.OpWait, prog.OpJoin:
		return "#95a5a6"
	case prog.OpKill:
		return "#e74c3c"
	case prog.OpCheck:
		return "#8e44ad"
	}
	if k.ChangesVMA() {
		return "#e67e22"
	}
	return "#16a085"
}

// timelineLegend explains the timeline's colours.
const timelineLegend = `<div class="legend">
<span><i style="background:#4a90d9"></i>store / pwrite / storeloop</span>
<span><i style="background:#e67e22"></i>mapping change</span>
<span><i style="background:#27ae60"></i>fork</span>
<span><i style="background:#95a5a6"></i>wait / join</span>
<span><i style="background:#e74c3c"></i>kill</span>
<span><i style="background:#8e44ad"></i>check</span>
<span><i style="background:#f1c40f;transform:rotate(45deg)"></i>view</span>
<span><i style="background:#fff;border:2px solid #d0021b"></i>where the finding is</span>
<span><i style="background:repeating-linear-gradient(45deg,#ccc,#ccc 2px,#fff 2px,#fff 4px)"></i>did not run</span>
</div>`

// The geometry of a timeline (pixels).
const (
	tlLeft  = 150
	tlLaneH = 34
	tlTop   = 26
	tlBoxH  = 16
)

// timeline is a timeline being drawn: the program and what it did, the
// lanes, the events in columns (from column first of all events).
type timeline struct {
	p      *prog.Program
	o      *obs.Observation
	ev     *checker.Finding
	ls     []lane
	laneOf map[[2]int]int
	evs    []event
	first  int
	colW   int
	width  int
	b      html
}

func (t *timeline) x(c int) int { return tlLeft + c*t.colW + t.colW/2 }
func (t *timeline) y(l int) int { return tlTop + l*tlLaneH + tlLaneH/2 }

// timelineSVG draws the processes and threads as lanes and every operation
// and view as a box in the order they happened; a bar under an operation
// shows how long it lasted in that order (a wait spans its child's life),
// arrows show forks and waits.
func timelineSVG(p *prog.Program, o *obs.Observation, ev *checker.Finding) (string, int) {
	t := &timeline{p: p, o: o, ev: ev, ls: lanes(p), laneOf: map[[2]int]int{}}
	for i, l := range t.ls {
		t.laneOf[[2]int{l.proc, l.thread}] = i
	}
	t.evs = order(p, o)
	truncated := 0
	if len(t.evs) > MaxTimelineEvents {
		// Draw the window around the finding's operation or view.
		if ev != nil {
			for j, e := range t.evs {
				if e.op >= 0 && e.op == ev.Op || e.op < 0 && e.view == ev.View {
					t.first = min(max(j-MaxTimelineEvents/2, 0), len(t.evs)-MaxTimelineEvents)
					break
				}
			}
		}
		truncated = len(t.evs) - MaxTimelineEvents
		t.evs = t.evs[t.first : t.first+MaxTimelineEvents]
	}
	t.colW = min(max(900/max(len(t.evs), 1), 24), 40)
	t.width = tlLeft + t.colW*len(t.evs) + 30
	height := tlTop + tlLaneH*len(t.ls) + 10
	colOfOp := map[int]int{}
	for c, e := range t.evs {
		if e.op >= 0 {
			colOfOp[e.op] = c
		}
	}
	b := &t.b
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" class="timeline">`, t.width, height, t.width, height)
	b.f(`<defs><marker id="arr" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker>`)
	b.f(`<pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="4" height="4" fill="#fff"/><rect width="2" height="4" fill="#ccc"/></pattern></defs>`)
	t.drawLanes(colOfOp)
	// Column numbers every 5 columns.
	for c := range t.evs {
		if (t.first+c)%5 == 0 {
			b.f(`<text x="%d" y="14" font-size="10" fill="#8a93a3" text-anchor="middle">%d</text>`, t.x(c), t.first+c)
		}
	}
	t.drawArrows(colOfOp)
	// Operations and views.
	for c, e := range t.evs {
		if e.view >= 0 {
			t.drawView(c, e.view)
		} else {
			t.drawOp(c, e.op)
		}
	}
	b.f(`</svg>`)
	return b.String(), truncated
}

// drawLanes draws a lane per process and thread: a process's line runs
// from its fork to the end of its wait.
func (t *timeline) drawLanes(colOfOp map[int]int) {
	lifeFrom := map[int]int{0: 0}
	lifeTo := map[int]int{0: len(t.evs) - 1}
	for i, op := range t.p.Ops {
		c, ok := colOfOp[i]
		if !ok {
			continue
		}
		switch op.Kind {
		case prog.OpFork:
			lifeFrom[op.Fork+1] = c
		case prog.OpWait:
			lifeTo[op.Fork+1] = spanEnd(t.evs, t.o, i, c)
		}
	}
	for li, l := range t.ls {
		yy := t.y(li)
		if li%2 == 0 {
			t.b.f(`<rect x="0" y="%d" width="%d" height="%d" fill="#f7f8fa"/>`, tlTop+li*tlLaneH, t.width, tlLaneH)
		}
		t.b.f(`<text x="%d" y="%d" font-size="12" fill="#333">%s</text>`, 6+10*l.depth, yy+4, esc(l.label))
		from, to := 0, len(t.evs)-1
		if l.thread == 0 {
			if f, ok := lifeFrom[l.proc]; ok {
				from = f
			}
			if e, ok := lifeTo[l.proc]; ok {
				to = e
			}
		}
		t.b.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#c5cad3" stroke-width="2"/>`, t.x(from), yy, t.x(max(to, from)), yy)
	}
}

// drawArrows draws the fork and wait arrows.
func (t *timeline) drawArrows(colOfOp map[int]int) {
	x, y, colW := t.x, t.y, t.colW
	for i, op := range t.p.Ops {
		c, ok := colOfOp[i]
		if !ok || op.Thread != 0 {
			continue
		}
		from := t.laneOf[[2]int{op.Proc, op.Thread}]
		child, ok := t.laneOf[[2]int{op.Fork + 1, 0}]
		if !ok {
			continue
		}
		switch op.Kind {
		case prog.OpFork:
			t.b.f(`<path d="M%d,%d C%d,%d %d,%d %d,%d" fill="none" stroke="#27ae60" stroke-width="1.3" stroke-dasharray="3,2" marker-end="url(#arr)"/>`,
				x(c), y(from)+tlBoxH/2, x(c), y(child), x(c)+colW/2, y(child), x(c)+colW-4, y(child))
		case prog.OpWait:
			end := spanEnd(t.evs, t.o, i, c)
			t.b.f(`<path d="M%d,%d C%d,%d %d,%d %d,%d" fill="none" stroke="#7f8c8d" stroke-width="1.3" marker-end="url(#arr)"/>`,
				x(end)-2, y(child), x(end)+colW/2, y(child), x(end)+colW/2, y(from)+tlBoxH/2+6, x(end)+2, y(from)+tlBoxH/2+2)
		}
	}
}

// drawView draws view vi, in column c, as a diamond.
func (t *timeline) drawView(c, vi int) {
	v := t.o.Views[vi]
	li, ok := t.laneOf[[2]int{v.Proc, 0}]
	if !ok {
		return
	}
	cx, cy := t.x(c), t.y(li)
	stroke := "#b7950b"
	sw := 1.0
	if t.ev != nil && t.ev.View == vi {
		stroke, sw = "#d0021b", 2.5
	}
	readable, words := 0, len(v.Words)
	for _, r := range v.Runs {
		if r.State == obs.Readable {
			readable += r.N
		}
	}
	t.b.f(`<g><title>view %d of %s (%s): %d readable pages, %d non-zero words%s</title><path d="M%d,%d l8,8 l-8,8 l-8,-8 z" fill="#f1c40f" stroke="%s" stroke-width="%.1f"/></g>`,
		vi, esc(procLabel(t.p, v.Proc)), esc(atName(v.At)), readable, words, truncNote(v.Truncated), cx, cy-8, stroke, sw)
}

// drawOp draws operation i, in column c, as a box, with a bar under it
// as long as it lasted.
func (t *timeline) drawOp(c, i int) {
	p, o := t.p, t.o
	op := p.Ops[i]
	li, ok := t.laneOf[[2]int{op.Proc, op.Thread}]
	if !ok {
		return
	}
	boxW := t.colW - 6
	cx, cy := t.x(c), t.y(li)
	var r obs.OpResult
	if o != nil && i < len(o.Ops) {
		r = o.Ops[i]
	}
	end := spanEnd(t.evs, o, i, c)
	if end > c {
		t.b.f(`<rect x="%d" y="%d" width="%d" height="3" fill="%s" opacity="0.45"/>`, cx, cy+tlBoxH/2+1, t.x(end)-cx, opColor(op.Kind))
	}
	fill := opColor(op.Kind)
	if !r.Ran {
		fill = "url(#hatch)"
	}
	stroke, sw := "#0004", 1.0
	if t.ev != nil && t.ev.Op == i {
		stroke, sw = "#d0021b", 2.5
	}
	t.b.f(`<g><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="3" fill="%s" stroke="%s" stroke-width="%.1f"/>`,
		esc(opTitle(p, o, i)), cx-boxW/2, cy-tlBoxH/2, boxW, tlBoxH, fill, stroke, sw)
	tc := "#fff"
	if !r.Ran {
		tc = "#333"
	}
	t.b.f(`<text x="%d" y="%d" font-size="9.5" font-weight="600" fill="%s" text-anchor="middle">%s</text>`, cx, cy+3, tc, opAbbrev[op.Kind])
	t.b.f(`<text x="%d" y="%d" font-size="8.5" fill="#666" text-anchor="middle">%d</text></g>`, cx, cy-tlBoxH/2-2, i)
}

// spanEnd is the last column that started before operation i ended.
func spanEnd(evs []event, o *obs.Observation, i, c int) int {
	if o == nil || i >= len(o.Ops) || !o.Ops[i].Ran || o.Ops[i].End <= o.Ops[i].Start {
		return c
	}
	end := o.Ops[i].End
	last := c
	for j := c + 1; j < len(evs); j++ {
		e := evs[j]
		if e.op < 0 {
			continue
		}
		if e.op >= len(o.Ops) {
			break
		}
		if r := o.Ops[e.op]; r.Ran && r.Start < end {
			last = j
		} else if r.Ran {
			break
		}
	}
	// Views taken by the children a wait covers sit inside its span too.
	for last+1 < len(evs) && evs[last+1].op < 0 && last > c {
		v := o.Views[evs[last+1].view]
		if v.At == obs.AtEnd {
			break
		}
		last++
	}
	return last
}

func atName(at int) string {
	switch at {
	case obs.AtStart:
		return "start"
	case obs.AtEnd:
		return "end"
	}
	return fmt.Sprintf("check at op %d", at)
}

func truncNote(t bool) string {
	if t {
		return " (truncated)"
	}
	return ""
}

// opTitle describes an operation and its result.
func opTitle(p *prog.Program, o *obs.Observation, i int) string {
	s := fmt.Sprintf("op %d: %s", i, p.Ops[i].String())
	if o == nil || i >= len(o.Ops) {
		return s
	}
	return s + " — " + resultText(p.Ops[i], o.Ops[i])
}

func resultText(op prog.Op, r obs.OpResult) string {
	if !r.Ran {
		if r.Skip != "" {
			return "skipped: " + r.Skip
		}
		return "did not run"
	}
	s := "ok"
	if r.Errno != 0 {
		s = fmt.Sprintf("errno %d (%s)", r.Errno, errnoName(r.Errno))
	}
	switch op.Kind {
	case prog.OpFork:
		s += fmt.Sprintf(", pid %d", r.Ret)
	case prog.OpWait:
		s += fmt.Sprintf(", status %#x", r.Ret)
	case prog.OpMremap:
		if r.Errno == 0 {
			s += fmt.Sprintf(", at %#x", r.Ret)
		}
	}
	if r.Skipped > 0 {
		s += fmt.Sprintf(", %d slots skipped", r.Skipped)
	}
	if r.End > r.Start {
		s += fmt.Sprintf(", %s", dur(r.End-r.Start))
	}
	return s
}

func dur(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2fs", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%dns", ns)
}

var errnoNames = map[int]string{1: "EPERM", 4: "EINTR", 9: "EBADF", 11: "EAGAIN", 12: "ENOMEM", 13: "EACCES",
	14: "EFAULT", 16: "EBUSY", 17: "EEXIST", 22: "EINVAL", 28: "ENOSPC", 38: "ENOSYS", 95: "EOPNOTSUPP"}

func errnoName(e int) string {
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return fmt.Sprintf("errno %d", e)
}
