package latency

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Plot is a small server-side SVG chart: panels of lines with optional
// min/max whiskers. No scripts.
type Plot struct {
	Title  string
	Notes  []string // lines under the title
	Panels []Panel
}

// Panel is one chart.
type Panel struct {
	Title  string
	XLabel string
	YLabel string
	LogX   bool
	LogY   bool
	XTicks []Tick // optional; computed otherwise
	Lines  []Line
	// HLine draws a dashed horizontal reference at this y (if > 0).
	HLine float64
}

// Tick is an axis tick.
type Tick struct {
	V     float64
	Label string
}

// Line is one curve.
type Line struct {
	Name   string
	Points []Point
	Dashed bool
	Color  string // default: by position
}

// Point is a point with an optional whisker (Lo, Hi both 0: none).
type Point struct{ X, Y, Lo, Hi float64 }

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

const (
	pw, ph         = 640, 300
	ml, mr, mt, mb = 70, 200, 30, 45
	panelGap       = 20
	headerLine     = 16
)

// WriteSVG renders p.
func (p *Plot) WriteSVG(w io.Writer) error {
	head := 30 + headerLine*len(p.Notes)
	height := head + len(p.Panels)*(ph+panelGap)
	width := pw
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(p.Title))
	for i, n := range p.Notes {
		if len(n) > 140 {
			n = n[:137] + "..."
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">%s</text>`+"\n", 20+headerLine*(i+1), html.EscapeString(n))
	}
	for i, pn := range p.Panels {
		pn.render(&b, head+i*(ph+panelGap))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panelScale maps a panel's data to its plot area.
type panelScale struct {
	x0, x1, y0, y1   float64 // the plot area
	minX, maxX, minY float64 // the data's ranges
	lyMin, lyMax     float64 // the y axis (log10 with LogY)
	logX, logY       bool
}

func (s *panelScale) fx(v float64) float64 {
	x0, x1, minX, maxX := s.x0, s.x1, s.minX, s.maxX
	if s.logX {
		v, minX, maxX := math.Log(v), math.Log(minX), math.Log(maxX)
		if maxX == minX {
			return (x0 + x1) / 2
		}
		return x0 + (v-minX)/(maxX-minX)*(x1-x0)
	}
	if maxX == minX {
		return (x0 + x1) / 2
	}
	return x0 + (v-minX)/(maxX-minX)*(x1-x0)
}

func (s *panelScale) fy(v float64) float64 {
	if s.logY {
		v = math.Log10(math.Max(v, s.minY))
	}
	if s.lyMax == s.lyMin {
		return (s.y0 + s.y1) / 2
	}
	return s.y0 - (v-s.lyMin)/(s.lyMax-s.lyMin)*(s.y0-s.y1)
}

// scale is the panel's scale with its top at top.
func (pn *Panel) scale(top int) *panelScale {
	s := &panelScale{x0: float64(ml), x1: float64(pw - mr), y0: float64(top + ph - mb), y1: float64(top + mt), logX: pn.LogX, logY: pn.LogY}
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, l := range pn.Lines {
		for _, p := range l.Points {
			minX, maxX = math.Min(minX, p.X), math.Max(maxX, p.X)
			lo, hi := p.Y, p.Y
			if p.Lo != 0 || p.Hi != 0 {
				lo, hi = p.Lo, p.Hi
			}
			minY, maxY = math.Min(minY, lo), math.Max(maxY, hi)
		}
	}
	if pn.HLine > 0 {
		minY, maxY = math.Min(minY, pn.HLine), math.Max(maxY, pn.HLine)
	}
	if math.IsInf(minX, 0) {
		minX, maxX, minY, maxY = 1, 2, 0, 1
	}
	if !pn.LogY {
		minY = math.Min(minY, 0)
	}
	if pn.LogY && minY <= 0 {
		minY = maxY / 1e3
	}
	s.minX, s.maxX, s.minY = minX, maxX, minY
	s.lyMin, s.lyMax = minY, maxY*1.08
	if pn.LogY {
		s.lyMin, s.lyMax = math.Log10(minY)-0.05, math.Log10(maxY)+0.05
	}
	return s
}

func (pn *Panel) render(b *strings.Builder, top int) {
	s := pn.scale(top)
	x0, x1, y0, y1 := s.x0, s.x1, s.y0, s.y1
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" font-weight="bold">%s</text>`+"\n", ml, top+mt-10, html.EscapeString(pn.Title))
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, y1, x1-x0, y0-y1)
	// y ticks
	for _, t := range yTicks(s.lyMin, s.lyMax, pn.LogY) {
		y := s.fy(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, x0, y, x1, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, y+4, fmtNum(t))
	}
	for _, t := range pn.xTicks(s.minX, s.maxX) {
		x := s.fx(t.V)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, x, y0, x, y1)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+14, html.EscapeString(t.Label))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, y0+32, html.EscapeString(pn.XLabel))
	fmt.Fprintf(b, `<text transform="translate(%d,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", 14, (y0+y1)/2, html.EscapeString(pn.YLabel))
	if pn.HLine > 0 {
		y := s.fy(pn.HLine)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="2,3"/>`+"\n", x0, y, x1, y)
	}
	for i, l := range pn.Lines {
		l.render(b, s, i, top)
	}
}

// xTicks are the panel's x ticks: XTicks, else every x of the data (or
// evenly spaced ones when there are many).
func (pn *Panel) xTicks(minX, maxX float64) []Tick {
	ticks := pn.XTicks
	if len(ticks) != 0 {
		return ticks
	}
	seen := map[float64]bool{}
	for _, l := range pn.Lines {
		for _, p := range l.Points {
			if !seen[p.X] {
				seen[p.X] = true
				ticks = append(ticks, Tick{p.X, fmtNum(p.X)})
			}
		}
	}
	if len(ticks) > 12 && !pn.LogX {
		ticks = nil
		for _, v := range yTicks(minX, maxX, false) {
			ticks = append(ticks, Tick{v, fmtNum(v)})
		}
	}
	return ticks
}

// render draws line l, the i-th of a panel with its top at top, and its
// legend entry.
func (l *Line) render(b *strings.Builder, s *panelScale, i, top int) {
	c := palette[i%len(palette)]
	if l.Color != "" {
		c = l.Color
	}
	dash := ""
	if l.Dashed {
		dash = ` stroke-dasharray="6,3"`
	}
	var pts []string
	for _, p := range l.Points {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", s.fx(p.X), s.fy(p.Y)))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
	for _, p := range l.Points {
		if len(l.Points) > 40 {
			break // a dense line: no markers
		}
		x := s.fx(p.X)
		if p.Lo != 0 || p.Hi != 0 {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, x, s.fy(p.Lo), x, s.fy(p.Hi), c)
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", x, s.fy(p.Y), c)
	}
	ly := float64(top+mt) + float64(i)*16 + 8
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`, s.x1+10, ly, s.x1+30, ly, c, dash)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", s.x1+35, ly+4, html.EscapeString(l.Name))
}

func yTicks(lo, hi float64, logY bool) []float64 {
	var out []float64
	if logY {
		for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
			v := math.Pow(10, e)
			if e >= lo && e <= hi {
				out = append(out, v)
			}
		}
		return out
	}
	span := hi - lo
	if span <= 0 {
		return []float64{lo}
	}
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 6 {
			step *= m
			break
		}
	}
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		out = append(out, v)
	}
	return out
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	default:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
	}
}

// BenchPlot is the fork benchmark's figure: fork time, parent stall and
// the ratio of fork time to the baseline, against size.
func BenchPlot(res []Result, base int, notes []string) *Plot {
	p := &Plot{Title: "fork() latency against resident memory (median, whiskers min..max)", Notes: notes}
	var ticks []Tick
	if len(res) > 0 {
		for _, sz := range res[0].Resp.Sizes {
			ticks = append(ticks, Tick{float64(sz >> 20), MiB(sz)})
		}
	}
	mk := func(title, ylabel string, m Metric) Panel {
		pn := Panel{Title: title, XLabel: "resident memory (MiB, touched)", YLabel: ylabel, LogX: true, LogY: true, XTicks: ticks}
		for _, r := range res {
			l := Line{Name: r.Series.Name}
			for i, sz := range r.Resp.Sizes {
				st := StatOf(r.Resp.Samples[i], m)
				l.Points = append(l.Points, Point{float64(sz >> 20), float64(st.Median) / 1e6, float64(st.Min) / 1e6, float64(st.Max) / 1e6})
			}
			pn.Lines = append(pn.Lines, l)
		}
		return pn
	}
	p.Panels = append(p.Panels, mk("fork() call", "ms (log)", Metrics[0]))
	p.Panels = append(p.Panels, mk("parent's first write to every 2 MiB range after fork, total", "ms (log)", Metrics[1]))
	rp := Panel{Title: "fork() median / baseline's (" + res[base].Series.Name + ")", XLabel: "resident memory (MiB, touched)", YLabel: "ratio", LogX: true, LogY: true, XTicks: ticks, HLine: 1}
	for i, r := range res {
		if i == base {
			continue
		}
		l := Line{Name: r.Series.Name, Color: palette[i%len(palette)]}
		for j, sz := range r.Resp.Sizes {
			t := StatOf(r.Resp.Samples[j], Metrics[0]).Median
			b := StatOf(res[base].Resp.Samples[j], Metrics[0]).Median
			if b > 0 && t > 0 {
				l.Points = append(l.Points, Point{X: float64(sz >> 20), Y: float64(t) / float64(b)})
			}
		}
		rp.Lines = append(rp.Lines, l)
	}
	p.Panels = append(p.Panels, rp)
	return p
}
