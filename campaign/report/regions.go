package report

import (
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// maxCells bounds the page cells of one region row; bigger regions are
// drawn with several pages per cell.
const maxCells = 128

const regionLegend = `<div class="legend">
<span><i style="background:#2e6fb7"></i>readable, non-zero content</span>
<span><i style="background:#bcd7f3"></i>readable, all zero</span>
<span><i style="background:#f0a04b"></i>mapped, no read access</span>
<span><i style="background:#b38cd9"></i>beyond end of file</span>
<span><i style="background:#eceef2"></i>unmapped</span>
<span><i style="background:#fff;border:2px solid #d0021b"></i>the bad page</span>
</div>`

// regionMap draws, for every region, one row per view: each page's state
// as every process saw it.
func regionMap(p *prog.Program, o *obs.Observation, ev *checker.Finding) string {
	var b html
	b.f(`<table><tr><th>region</th><th>kind</th><th class="num">pages</th><th>THP</th><th>base</th></tr>`)
	for r, reg := range p.Regions {
		b.f(`<tr><td>r%d</td><td>%s</td><td class="num">%d</td><td>%s</td><td class="mono">%#x</td></tr>`, r, reg.Kind, reg.Pages, reg.THP, prog.Base(r))
	}
	b.f(`</table>`)
	if o == nil || len(o.Views) == 0 {
		b.f(`<p class="note">No views were recorded.</p>`)
		return b.String()
	}
	b.f(regionLegend)
	for r, reg := range p.Regions {
		n := reg.Pages
		for _, v := range o.Views {
			for _, run := range v.Runs {
				if run.Region == r {
					n = max(n, run.First+run.N)
				}
			}
		}
		n = min(n, prog.SpanPages)
		per := (n + maxCells - 1) / maxCells
		cells := (n + per - 1) / per
		const left, cw, rh = 170, 7, 14
		cellW := cw
		if cells <= 32 {
			cellW = 16
		}
		width := left + cells*cellW + 10
		height := 20 + rh*len(o.Views) + 4
		b.f(`<h3>r%d <span class="note">%s, %d pages mapped at start; %d pages drawn, %d per cell</span></h3>`, r, reg.Kind, reg.Pages, n, per)
		b.f(`<div class="scroll"><svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" class="regionmap">`, width, height)
		for c := 0; c < cells; c += max(1, 8/cellW*4) {
			b.f(`<text x="%d" y="12" font-size="9" fill="#8a93a3">%d</text>`, left+c*cellW, c*per)
		}
		for vi := range o.Views {
			v := &o.Views[vi]
			state := make([]obs.PageState, n)
			for _, run := range v.Runs {
				if run.Region != r {
					continue
				}
				for pg := max(run.First, 0); pg < run.First+run.N && pg < n; pg++ {
					state[pg] = run.State
				}
			}
			content := map[int]bool{}
			for _, d := range v.Pages {
				if d.Region == r && d.NonZero > 0 {
					content[d.Page] = true
				}
			}
			yy := 18 + vi*rh
			weight := "normal"
			if ev != nil && ev.View == vi {
				weight = "bold"
			}
			b.f(`<text x="4" y="%d" font-size="10.5" font-weight="%s" fill="#333">v%d %s, %s</text>`, yy+10, weight, vi, esc(short(procLabel(p, v.Proc))), esc(atName(v.At)))
			for c := 0; c < cells; c++ {
				counts := map[string]int{}
				bad := false
				for pg := c * per; pg < (c+1)*per && pg < n; pg++ {
					counts[pageColor(state[pg], content[pg])]++
					if ev != nil && ev.Region == r && ev.Page == pg && (ev.View == vi || ev.View < 0) {
						bad = true
					}
				}
				col, best := "#eceef2", -1
				for k, cnt := range counts {
					if cnt > best || cnt == best && k < col {
						col, best = k, cnt
					}
				}
				stroke := `stroke="#fff" stroke-width="0.5"`
				if bad {
					stroke = `stroke="#d0021b" stroke-width="2"`
				}
				b.f(`<rect x="%d" y="%d" width="%d" height="%d" fill="%s" %s><title>r%d pages %d..%d in view %d</title></rect>`,
					left+c*cellW, yy, cellW, rh-2, col, stroke, r, c*per, min((c+1)*per, n)-1, vi)
			}
		}
		b.f(`</svg></div>`)
	}
	return b.String()
}

func short(s string) string {
	if i := strings.Index(s, " ("); i > 0 {
		return s[:i]
	}
	return s
}

func pageColor(s obs.PageState, content bool) string {
	switch s {
	case obs.Readable:
		if content {
			return "#2e6fb7"
		}
		return "#bcd7f3"
	case obs.NoAccess:
		return "#f0a04b"
	case obs.BeyondEOF:
		return "#b38cd9"
	}
	return "#eceef2"
}

// slotText says which operation wrote a value.
func slotText(p *prog.Program, v uint64) string {
	if v == 0 {
		return "0 (never written)"
	}
	op, k, ok := prog.DecodeSlotValue(v)
	if !ok || op >= len(p.Ops) {
		return fmt.Sprintf("%#x (no operation writes it)", v)
	}
	return fmt.Sprintf("%#x = slot %d of op %d `%s`", v, k, op, p.Ops[op].String())
}

// pageHistory is the bad page's story: every operation that wrote to it
// or changed its mapping, then what every view held at the bad word.
func pageHistory(p *prog.Program, o *obs.Observation, ev *checker.Finding) string {
	if ev == nil || ev.Region < 0 || ev.Region >= len(p.Regions) || ev.Expected == 0 && ev.Actual == 0 {
		return ""
	}
	page := ev.Page
	if page == 0 && ev.Off != 0 {
		page = int(ev.Off / prog.PageSize)
	}
	lo, hi := uint64(page)*prog.PageSize, uint64(page+1)*prog.PageSize
	var b html
	b.f(`<p>Page <b>r%d page %d</b> (%#x..%#x in the region), word at offset <b>%#x</b>. `, ev.Region, page, lo, hi, ev.Off)
	b.f(`Expected <span class="exp">%s</span>, actual <span class="act">%s</span>.</p>`, esc(slotText(p, ev.Expected)), esc(slotText(p, ev.Actual)))
	b.f(`<h3>Operations on the page</h3><table><tr><th class="num">op</th><th>process</th><th>operation</th><th>result</th><th>writes at %#x</th></tr>`, ev.Off)
	overlaps := func(off, n uint64) bool { return off < hi && off+n > lo }
	for i, op := range p.Ops {
		touches, word := false, ""
		switch op.Kind {
		case prog.OpStore, prog.OpPwrite, prog.OpStoreLoop, prog.OpProcMem, prog.OpPVWrite:
			if op.Region == ev.Region {
				op.SlotOffsets(func(k int, off uint64) {
					if off >= lo && off < hi {
						touches = true
					}
					if off == ev.Off {
						word = fmt.Sprintf("%#x", prog.SlotValue(i, k))
					}
				})
			}
		case prog.OpFork, prog.OpWait, prog.OpKill:
			touches = true
		default:
			if op.Kind.HasRange() || op.Len > 0 {
				touches = op.Region == ev.Region && overlaps(op.Off, max(op.Len, op.NewLen))
				if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 && op.To == ev.Region && overlaps(op.ToOff, op.NewLen) {
					touches = true
				}
			}
		}
		if !touches {
			continue
		}
		cls := ""
		if i == ev.Op {
			cls = ` class="hit"`
		}
		wc := ""
		if word != "" {
			var v uint64
			fmt.Sscanf(word, "0x%x", &v)
			switch v {
			case ev.Expected:
				wc = ` class="exp"`
			case ev.Actual:
				wc = ` class="act"`
			}
		}
		res := ""
		if o != nil && i < len(o.Ops) {
			res = resultText(op, o.Ops[i])
		}
		b.f(`<tr%s><td class="num">%d</td><td>%s</td><td class="mono">%s</td><td>%s</td><td class="mono"><span%s>%s</span></td></tr>`,
			cls, i, esc(short(procLabel(p, op.Proc))), esc(op.String()), esc(res), wc, word)
	}
	b.f(`</table>`)
	if o == nil {
		return b.String()
	}
	b.f(`<h3>What each process saw at %#x</h3><table><tr><th>view</th><th>process</th><th>when</th><th>page</th><th>word</th></tr>`, ev.Off)
	for vi, v := range o.Views {
		st := v.StateAt(ev.Region, page)
		val := uint64(0)
		for _, w := range v.Words {
			if w.Region == ev.Region && w.Off == ev.Off {
				val = w.Value
			}
		}
		cls := ""
		if vi == ev.View {
			cls = ` class="hit"`
		}
		wc := ""
		switch {
		case st != obs.Readable || vi != ev.View:
			// Other views may rightly hold either value.
		case val == ev.Expected:
			wc = ` class="exp"`
		case val == ev.Actual:
			wc = ` class="act"`
		}
		word := "—"
		if st == obs.Readable {
			word = slotText(p, val)
		}
		b.f(`<tr%s><td>v%d</td><td>%s</td><td>%s</td><td>%s</td><td class="mono"><span%s>%s</span></td></tr>`,
			cls, vi, esc(procLabel(p, v.Proc)), esc(atName(v.At)), st, wc, esc(word))
	}
	b.f(`</table>`)
	return b.String()
}
