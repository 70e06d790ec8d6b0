package redis

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/forkfuzz/forkfuzz/campaign/latency"
)

// Class is a set of commands the latency figure summarises.
type Class struct {
	Name string
	Lat  []int64 // ns, sorted
}

// Percentile returns the p-th percentile (0..100) by nearest rank.
func (c Class) Percentile(p float64) int64 {
	if len(c.Lat) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(c.Lat)))) - 1
	return c.Lat[max(0, min(i, len(c.Lat)-1))]
}

// Classes splits the writer commands: those overlapping a BGSAVE call
// (the fork), those overlapping a BGSAVE's child (from the call to the
// child's end, the snapshot period), and the others.
func (r *Result) Classes() []Class {
	fork, during, outside := Class{Name: "overlapping the BGSAVE call (fork)"}, Class{Name: "during BGSAVE (call to child's end)"}, Class{Name: "outside BGSAVE"}
	for _, o := range r.Ops {
		l := o.Resp - o.Inv
		inFork, inSave := false, false
		for _, rd := range r.Rounds {
			if o.Inv <= rd.BgResp && o.Resp >= rd.BgInv {
				inFork = true
			}
			if o.Inv <= rd.BgDone && o.Resp >= rd.BgInv {
				inSave = true
			}
		}
		if inFork {
			fork.Lat = append(fork.Lat, l)
		}
		if inSave {
			during.Lat = append(during.Lat, l)
		} else {
			outside.Lat = append(outside.Lat, l)
		}
	}
	out := []Class{outside, during, fork}
	for i := range out {
		sort.Slice(out[i].Lat, func(a, b int) bool { return out[i].Lat[a] < out[i].Lat[b] })
	}
	return out
}

// Percentiles reported.
var Percentiles = []struct {
	Name string
	P    float64
}{{"P50", 50}, {"P99", 99}, {"P99.9", 99.9}, {"max", 100}}

func usf(ns int64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) }

// WriteTable writes the rounds and the latency table.
func (r *Result) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tBGSAVE call ms\tlatest_fork_usec\tchild done ms\twrites\tRDB MiB\tRDB keys\tsnapshot\t")
	for _, rd := range r.Rounds {
		v := "consistent"
		if rd.Finding != nil {
			v = "VIOLATION"
		}
		if rd.Corrupted != "" {
			v += " (corrupted: " + rd.Corrupted + ")"
		}
		fmt.Fprintf(tw, "%d\t%.3f\t%d\t%.1f\t%d\t%.1f\t%d\t%s\t\n", rd.N, float64(rd.BgResp-rd.BgInv)/1e6, rd.ForkUsec,
			float64(rd.BgDone-rd.BgInv)/1e6, rd.Writes, float64(rd.RDBBytes)/(1<<20), rd.RDBKeys, v)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "SET latency (us)\tcommands\t")
	for _, p := range Percentiles {
		fmt.Fprintf(tw, "%s\t", p.Name)
	}
	fmt.Fprintln(tw)
	for _, c := range r.Classes() {
		fmt.Fprintf(tw, "%s\t%d\t", c.Name, len(c.Lat))
		for _, p := range Percentiles {
			fmt.Fprintf(tw, "%s\t", usf(c.Percentile(p.P)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// Plot is the latency figure: percentiles per class, and the first
// round's timeline (slowest command per 10 ms) with the BGSAVE marks.
func (r *Result) Plot(notes []string) *latency.Plot {
	p := &latency.Plot{Title: "Redis SET latency around BGSAVE (" + r.Version + ")", Notes: notes}
	var ticks []latency.Tick
	for i, pc := range Percentiles {
		ticks = append(ticks, latency.Tick{V: float64(i + 1), Label: pc.Name})
	}
	pn := latency.Panel{Title: "SET latency percentiles", XLabel: "percentile", YLabel: "microseconds (log)", LogY: true, XTicks: ticks}
	for _, c := range r.Classes() {
		if len(c.Lat) == 0 {
			continue
		}
		l := latency.Line{Name: c.Name}
		for i, pc := range Percentiles {
			l.Points = append(l.Points, latency.Point{X: float64(i + 1), Y: float64(c.Percentile(pc.P)) / 1e3})
		}
		pn.Lines = append(pn.Lines, l)
	}
	p.Panels = append(p.Panels, pn)
	if len(r.Rounds) > 0 {
		rd := r.Rounds[0]
		lo, hi := rd.BgInv-int64(r.Config.Before), rd.BgDone+int64(r.Config.After)
		const bucket = int64(10e6)
		maxes := map[int64]int64{}
		for _, o := range r.Ops {
			if o.Inv < lo || o.Inv > hi {
				continue
			}
			b := (o.Inv - rd.BgInv) / bucket
			if o.Inv < rd.BgInv {
				b = -((rd.BgInv - o.Inv + bucket - 1) / bucket)
			}
			maxes[b] = max(maxes[b], o.Resp-o.Inv)
		}
		var keys []int64
		for b := range maxes {
			keys = append(keys, b)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		tl := latency.Panel{Title: fmt.Sprintf("round 1 timeline: slowest SET per 10 ms; BGSAVE called at 0, child done at %.0f ms", float64(rd.BgDone-rd.BgInv)/1e6),
			XLabel: "ms since BGSAVE was called", YLabel: "microseconds (log)", LogY: true}
		l := latency.Line{Name: "slowest SET"}
		for _, b := range keys {
			l.Points = append(l.Points, latency.Point{X: float64(b * bucket / 1e6), Y: float64(maxes[b]) / 1e3})
		}
		tl.Lines = append(tl.Lines, l)
		// The BGSAVE window as a second line at the top.
		top := 0.0
		for _, v := range maxes {
			top = math.Max(top, float64(v)/1e3)
		}
		tl.Lines = append(tl.Lines, latency.Line{Name: "BGSAVE in progress", Dashed: true, Points: []latency.Point{
			{X: 0, Y: top * 1.5}, {X: float64(rd.BgDone-rd.BgInv) / 1e6, Y: top * 1.5}}})
		for t := float64(lo-rd.BgInv) / 1e6; t <= float64(hi-rd.BgInv)/1e6; t += 100 {
			tl.XTicks = append(tl.XTicks, latency.Tick{V: math.Round(t/100) * 100, Label: strconv.Itoa(int(math.Round(t/100) * 100))})
		}
		p.Panels = append(p.Panels, tl)
	}
	return p
}
