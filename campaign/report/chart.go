package report

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// pt is one point of a time series.
type pt struct {
	t time.Time
	v float64
}

// series is a named line; each segment is drawn unbroken (a resumed
// campaign has one segment per run).
type series struct {
	name, color string
	segs        [][]pt
}

// lineChart draws series over wall-clock time as an SVG.
func lineChart(title string, ss []series, w, h int) string {
	const left, right, top, bottom = 58, 14, 24, 30
	var t0, t1 time.Time
	vmax := 0.0
	n := 0
	for _, s := range ss {
		for _, seg := range s.segs {
			for _, p := range seg {
				if t0.IsZero() || p.t.Before(t0) {
					t0 = p.t
				}
				if p.t.After(t1) {
					t1 = p.t
				}
				if !math.IsNaN(p.v) && !math.IsInf(p.v, 0) {
					vmax = max(vmax, p.v)
				}
				n++
			}
		}
	}
	var b html
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" class="chart" role="img" aria-label="%s">`, w, h, esc(title))
	b.f(`<rect x="0" y="0" width="%d" height="%d" fill="#fff"/>`, w, h)
	b.f(`<text x="%d" y="15" font-size="12.5" font-weight="600" fill="#1d2330">%s</text>`, left, esc(title))
	if n == 0 {
		b.f(`<text x="%d" y="%d" font-size="12" fill="#8a93a3">no samples yet</text></svg>`, left, h/2)
		return b.String()
	}
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	top2 := niceCeil(vmax * 1.05)
	if top2 == 0 {
		top2 = 1
	}
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	x := func(t time.Time) float64 { return left + float64(t.Sub(t0))/float64(t1.Sub(t0))*pw }
	y := func(v float64) float64 { return float64(top) + ph - v/top2*ph }
	for i := 0; i <= 4; i++ {
		v := top2 * float64(i) / 4
		b.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e9ee"/><text x="%d" y="%.1f" font-size="10" fill="#6b7280" text-anchor="end">%s</text>`,
			left, y(v), w-right, y(v), left-4, y(v)+3, num(v))
	}
	span := t1.Sub(t0)
	for i := 0; i <= 4; i++ {
		t := t0.Add(span * time.Duration(i) / 4)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		b.f(`<text x="%.1f" y="%d" font-size="10" fill="#6b7280" text-anchor="%s">%s</text>`, x(t), h-bottom+14, anchor, t.Local().Format("15:04:05"))
	}
	b.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#9aa3b2"/>`, left, h-bottom, w-right, h-bottom)
	for _, s := range ss {
		for _, seg := range s.segs {
			var pts []string
			for _, p := range seg {
				if math.IsNaN(p.v) || math.IsInf(p.v, 0) {
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.t), y(p.v)))
			}
			if len(pts) == 1 {
				b.f(`<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, strings.Split(pts[0], ",")[0], strings.Split(pts[0], ",")[1], s.color)
			}
			if len(pts) > 1 {
				b.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8"/>`, strings.Join(pts, " "), s.color)
			}
		}
	}
	lx := w - right - 10
	for i := len(ss) - 1; i >= 0; i-- {
		s := ss[i]
		tw := 7*len(s.name) + 18
		lx -= tw
		b.f(`<rect x="%d" y="7" width="10" height="10" fill="%s"/><text x="%d" y="16" font-size="11" fill="#333">%s</text>`, lx, s.color, lx+13, esc(s.name))
	}
	b.f(`</svg>`)
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func num(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
