package report

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/cut"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// WitnessTimeout bounds the general consistent-cut check a report runs to
// draw a witness.
var WitnessTimeout = 5 * time.Second

const (
	maxWitnessCells  = 40
	maxWitnessWrites = 1500
)

// threadSection draws the consistent-cut witness of the finding's view (or
// of every violating view): the threads' stores to the judged cells in TSC
// time around the fork call, which of them the child saw, and the two
// writes no instant separates.
func threadSection(p *prog.Program, o *obs.Observation, ev *checker.Finding, attachments []string) string {
	if o == nil || len(o.Threads) == 0 {
		return ""
	}
	if ev == nil || !strings.HasPrefix(string(ev.Oracle), string(checker.OracleLinearizability)) {
		// Not a thread finding: the witnesses would cost a consistent-cut
		// check per fork for nothing.
		return fmt.Sprintf(`<p class="note">%d threads stored %d times (timed); this finding is not about them.</p>`, len(o.Threads), countStores(o))
	}
	ws := checker.CutWitnesses(p, o, WitnessTimeout)
	var pick []checker.CutWitness
	for _, w := range ws {
		if ev != nil && ev.View == w.View {
			pick = append(pick, w)
		}
	}
	if len(pick) == 0 {
		for _, w := range ws {
			if w.Verdict.Result != cut.Ok {
				pick = append(pick, w)
			}
		}
	}
	var b html
	for _, a := range attachments {
		b.f(`<p>Porcupine's view of this history: <a href="%s">%s</a></p>`, esc(a), esc(a))
	}
	if len(pick) == 0 {
		if len(ws) == 0 {
			b.f(`<p class="note">%d threads stored %d times; no child start view of a main-process fork was judged against them.</p>`, len(o.Threads), countStores(o))
		} else {
			b.f(`<p class="note">%d threads stored %d times; all %d child start views judged are consistent cuts of their stores.</p>`, len(o.Threads), countStores(o), len(ws))
		}
		return b.String()
	}
	for _, w := range pick {
		b.f(`<h3>fork f%d (op %d <code>%s</code>), child start view v%d: <span class="%s">%s</span></h3>`,
			w.Fork, w.ForkOp, esc(p.Ops[w.ForkOp].String()), w.View, map[bool]string{true: "exp", false: "act"}[w.Verdict.Result == cut.Ok], w.Verdict.Result)
		if w.Verdict.Reason != "" {
			b.f(`<p>%s</p>`, esc(w.Verdict.Reason))
		}
		b.f(`<div class="scroll">%s</div>`, witnessSVG(p, w))
		b.f(`<div class="legend"><span><i style="background:#27ae60"></i>the write the child saw</span><span><i style="background:#a9dfbf"></i>earlier writes to the cell</span><span><i style="background:#bdc3c7"></i>writes the child did not see</span><span><i style="background:#fdebd0"></i>the fork call</span><span><i style="background:#fff;border:2px solid #d0021b"></i>the witness: writes no cut separates</span></div>`)
	}
	return b.String()
}

func countStores(o *obs.Observation) int {
	n := 0
	for _, t := range o.Threads {
		n += len(t.Stores)
	}
	return n
}

// witnessLaneKey is a lane of the witness plot: one thread's writes to
// one cell.
type witnessLaneKey struct {
	thread int
	cell   uint64
}

// The geometry of the witness plot (pixels).
const (
	wLeft  = 190
	wPlotW = 820
	wLaneH = 16
	wTop   = 30
)

func witnessSVG(p *prog.Program, w checker.CutWitness) string {
	h := w.History
	v := w.Verdict
	lo, hi := h.ForkInv, h.ForkResp
	for _, x := range []*cut.Write{v.Seen, v.Missed} {
		if x != nil {
			lo, hi = min(lo, x.Inv), max(hi, x.Resp)
		}
	}
	pad := max((hi-lo)/2, 2)
	lo, hi = lo-pad, hi+pad
	byLane, keys, hidden := witnessLanes(w, lo, hi)
	width := wLeft + wPlotW + 20
	height := wTop + wLaneH*len(keys) + 34
	xs := func(t int64) float64 { return wLeft + float64(t-lo)/float64(hi-lo)*wPlotW }
	var b html
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" class="witness">`, width, height)
	b.f(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#fdebd0"/>`, xs(h.ForkInv), wTop-8, max(xs(h.ForkResp)-xs(h.ForkInv), 2), wLaneH*len(keys)+8)
	b.f(`<text x="%.1f" y="%d" font-size="11" fill="#a04000">fork call %d..%d</text>`, xs(h.ForkInv), wTop-12, h.ForkInv, h.ForkResp)
	drawn := 0
	for li, k := range keys {
		drawn = witnessLane(&b, p, w, k, byLane[k], wTop+li*wLaneH, drawn, xs)
	}
	yb := wTop + wLaneH*len(keys)
	if v.Seen != nil {
		b.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d0021b" stroke-dasharray="4,3"/><text x="%.1f" y="%d" font-size="10.5" fill="#d0021b">cut after %d (saw this)</text>`,
			xs(v.Seen.Inv), wTop-8, xs(v.Seen.Inv), yb+4, xs(v.Seen.Inv)+3, yb+16, v.Seen.Inv)
	}
	if v.Missed != nil {
		b.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d0021b" stroke-dasharray="4,3"/><text x="%.1f" y="%d" font-size="10.5" fill="#d0021b" text-anchor="end">cut before %d (missed this)</text>`,
			xs(v.Missed.Resp), wTop-8, xs(v.Missed.Resp), yb+4, xs(v.Missed.Resp)-3, yb+28, v.Missed.Resp)
	}
	b.f(`<text x="%d" y="%d" font-size="10" fill="#8a93a3">TSC %d</text><text x="%d" y="%d" font-size="10" fill="#8a93a3" text-anchor="end">TSC %d</text>`, wLeft, height-2, lo, wLeft+wPlotW, height-2, hi)
	if hidden > 0 {
		b.f(`<text x="4" y="%d" font-size="10" fill="#8a93a3">+%d cells not drawn</text>`, height-2, hidden)
	}
	b.f(`</svg>`)
	return b.String()
}

// witnessLanes are the writes between lo and hi by lane, the lanes to
// draw (the witnesses' first, at most maxWitnessCells) and how many more
// there are.
func witnessLanes(w checker.CutWitness, lo, hi int64) (map[witnessLaneKey][]cut.Write, []witnessLaneKey, int) {
	v := w.Verdict
	byLane := map[witnessLaneKey][]cut.Write{}
	for _, x := range w.History.Writes {
		if x.Resp < lo || x.Inv > hi {
			continue
		}
		k := witnessLaneKey{x.Thread, x.Cell}
		byLane[k] = append(byLane[k], x)
	}
	var keys []witnessLaneKey
	for k := range byLane {
		keys = append(keys, k)
	}
	witnessLane := func(k witnessLaneKey) bool {
		for _, x := range []*cut.Write{v.Seen, v.Missed} {
			if x != nil && x.Cell == k.cell && x.Thread == k.thread {
				return true
			}
		}
		return false
	}
	sort.Slice(keys, func(i, j int) bool {
		wi, wj := witnessLane(keys[i]), witnessLane(keys[j])
		if wi != wj {
			return wi
		}
		if keys[i].thread != keys[j].thread {
			return keys[i].thread < keys[j].thread
		}
		return keys[i].cell < keys[j].cell
	})
	hidden := 0
	if len(keys) > maxWitnessCells {
		hidden = len(keys) - maxWitnessCells
		keys = keys[:maxWitnessCells]
	}
	return byLane, keys, hidden
}

// witnessLane draws lane k at height y: its writes, green up to the one
// the snapshot saw, the witnesses outlined; drawn counts the writes drawn
// so far (at most maxWitnessWrites but the witnesses) and is returned.
func witnessLane(b *html, p *prog.Program, w checker.CutWitness, k witnessLaneKey, ws []cut.Write, y, drawn int, xs func(int64) float64) int {
	h, v := w.History, w.Verdict
	isWitness := func(x cut.Write) bool {
		return v.Seen != nil && *v.Seen == x || v.Missed != nil && *v.Missed == x
	}
	reg := w.Region[k.cell]
	b.f(`<text x="4" y="%d" font-size="10.5" fill="#333">t%d r%d+%#x</text>`, y+11, k.thread, reg, k.cell&(1<<40-1))
	b.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#e3e6ea"/>`, wLeft, y+7, wLeft+wPlotW, y+7)
	snap, inSnap := h.Snapshot[k.cell]
	seenIdx := -1
	sort.Slice(ws, func(i, j int) bool { return ws[i].Inv < ws[j].Inv })
	for i, x := range ws {
		if inSnap && x.Value == snap {
			seenIdx = i
		}
	}
	for i, x := range ws {
		if drawn >= maxWitnessWrites && !isWitness(x) {
			continue
		}
		drawn++
		col := "#bdc3c7"
		switch {
		case i == seenIdx:
			col = "#27ae60"
		case i < seenIdx:
			col = "#a9dfbf"
		}
		stroke := ""
		if isWitness(x) {
			stroke = ` stroke="#d0021b" stroke-width="2"`
		}
		desc := fmt.Sprintf("%#x", x.Value)
		if op, slot, ok := prog.DecodeSlotValue(x.Value); ok && op < len(p.Ops) {
			desc = fmt.Sprintf("%#x (write %d of op %d `%s`)", x.Value, slot, op, p.Ops[op].String())
		}
		b.f(`<rect x="%.1f" y="%d" width="%.1f" height="11" fill="%s"%s><title>t%d %s, TSC %d..%d</title></rect>`,
			xs(x.Inv), y+2, max(xs(x.Resp)-xs(x.Inv), 2), col, stroke, x.Thread, esc(desc), x.Inv, x.Resp)
	}
	return drawn
}
