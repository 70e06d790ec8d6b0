package cover

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Series is one campaign's coverage over time (a CSV written by Open).
type Series struct {
	Name   string
	T      []float64 // seconds
	Edges  []float64
	ForkMM []float64
}

// ReadSeries reads a coverage CSV (seconds,programs,pcs,edges,forkmm_pcs,corpus).
func ReadSeries(name, path string) (*Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &Series{Name: name}
	for i, r := range recs {
		if i == 0 {
			continue
		}
		if len(r) < 5 {
			return nil, fmt.Errorf("%s:%d: want 6 fields, have %d", path, i+1, len(r))
		}
		var v [3]float64
		for j, col := range []int{0, 3, 4} {
			if v[j], err = strconv.ParseFloat(r[col], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: field %d: %v", path, i+1, col+1, err)
			}
		}
		s.T, s.Edges, s.ForkMM = append(s.T, v[0]), append(s.Edges, v[1]), append(s.ForkMM, v[2])
	}
	return s, nil
}

// PlotSVG draws edges (solid) and fork/mm PCs (dashed) over time for
// every series.
func PlotSVG(w io.Writer, title string, series []*Series) {
	const W, H, L, R, T, B = 720.0, 420.0, 70.0, 20.0, 40.0, 50.0
	maxT, maxY := 1.0, 1.0
	for _, s := range series {
		for i := range s.T {
			maxT = max(maxT, s.T[i])
			maxY = max(maxY, s.Edges[i], s.ForkMM[i])
		}
	}
	x := func(t float64) float64 { return L + t/maxT*(W-L-R) }
	y := func(v float64) float64 { return H - B - v/maxY*(H-T-B) }
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", L, title)
	fmt.Fprintf(w, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n",
		L, H-B, W-R, H-B, L, T, L, H-B)
	for i := 0; i <= 5; i++ {
		v, t := maxY*float64(i)/5, maxT*float64(i)/5
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", L-5, y(v)+4, v)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="middle">%.0fs</text>`+"\n", x(t), H-B+18, t)
	}
	fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="middle">seconds since the first program</text>`+"\n", (L+W-R)/2, H-10)
	for k, s := range series {
		c := colors[k%len(colors)]
		for j, ys := range [][]float64{s.Edges, s.ForkMM} {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="`, c, map[bool]string{true: ` stroke-dasharray="6,4"`}[j == 1])
			for i := range s.T {
				fmt.Fprintf(w, "%.1f,%.1f ", x(s.T[i]), y(ys[i]))
			}
			fmt.Fprintln(w, `"/>`)
		}
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" fill="%s">%s: edges (solid), fork/mm PCs (dashed)</text>`+"\n", L+260, H-B-60+float64(k)*16, c, s.Name)
	}
	fmt.Fprintln(w, "</svg>")
}
