package redis

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/forkfuzz/forkfuzz/bench/latency"
)

// Class is a set of commands the latency figure summarises.
type Class struct {
	Name string  `json:"name"`
	Lat  []int64 `json:"lat"` // ns, sorted
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

// Summary is what the reports need of a run (small enough to send from a
// guest): the rounds, the latency classes and the first round's timeline.
type Summary struct {
	Version  string          `json:"version"`
	UsedMem  string          `json:"used_mem"`
	Keys     int             `json:"keys"`
	Size     int             `json:"value_size"`
	Writers  int             `json:"writers"`
	Seed     uint64          `json:"seed"`
	Rounds   []Round         `json:"rounds"`
	Classes  []Class         `json:"classes"`
	Timeline []latency.Point `json:"timeline"` // ms since BGSAVE call, slowest SET per 10 ms (us)
}

// Summarize computes the summary.
func (r *Result) Summarize() *Summary {
	s := &Summary{Version: r.Version, UsedMem: r.UsedMem, Keys: r.Config.Keys, Size: r.Config.ValueSize, Writers: r.Config.Writers,
		Seed: r.Config.Seed, Rounds: r.Rounds, Classes: r.Classes()}
	if len(r.Rounds) == 0 {
		return s
	}
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
	for _, b := range keys {
		s.Timeline = append(s.Timeline, latency.Point{X: float64(b * bucket / 1e6), Y: float64(maxes[b]) / 1e3})
	}
	return s
}

// Findings counts rounds with a finding.
func (s *Summary) Findings() int {
	n := 0
	for _, x := range s.Rounds {
		if x.Finding != nil {
			n++
		}
	}
	return n
}

// Percentiles reported.
var Percentiles = []struct {
	Name string
	P    float64
}{{"P50", 50}, {"P99", 99}, {"P99.9", 99.9}, {"max", 100}}

func usf(ns int64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) }

// WriteTable writes the rounds and the latency table.
func (r *Summary) WriteTable(w io.Writer) {
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
	for _, c := range r.Classes {
		fmt.Fprintf(tw, "%s\t%d\t", c.Name, len(c.Lat))
		for _, p := range Percentiles {
			fmt.Fprintf(tw, "%s\t", usf(c.Percentile(p.P)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// Named is a summary with the name of its series (host, a VM kernel, a
// fork mode).
type Named struct {
	Name string
	*Summary
}

// WriteComparison writes one line per series: the fork as Redis measured
// it and the latency percentiles during and outside BGSAVE.
func WriteComparison(w io.Writer, ss []Named) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "series\tlatest_fork_usec (median)\tBGSAVE call ms (median)\t")
	for _, cl := range []string{"outside", "during"} {
		for _, p := range Percentiles {
			fmt.Fprintf(tw, "%s %s us\t", cl, p.Name)
		}
	}
	fmt.Fprintln(tw, "snapshots\t")
	for _, s := range ss {
		var forks, calls []int64
		for _, rd := range s.Rounds {
			forks = append(forks, rd.ForkUsec)
			calls = append(calls, rd.BgResp-rd.BgInv)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t", s.Name, median(forks), float64(median(calls))/1e6)
		for _, c := range s.Classes[:2] {
			for _, p := range Percentiles {
				fmt.Fprintf(tw, "%s\t", usf(c.Percentile(p.P)))
			}
		}
		fmt.Fprintf(tw, "%d/%d consistent\t\n", len(s.Rounds)-s.Findings(), len(s.Rounds))
	}
	tw.Flush()
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]int64(nil), v...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	if len(c)%2 == 0 {
		return (c[len(c)/2-1] + c[len(c)/2]) / 2
	}
	return c[len(c)/2]
}

// ComparisonPlot is the latency figure for several series: percentiles
// during (solid) and outside (dashed) BGSAVE, and each series' first-round
// timeline.
func ComparisonPlot(ss []Named, notes []string) *latency.Plot {
	p := &latency.Plot{Title: "Redis SET latency during and outside BGSAVE", Notes: notes}
	var ticks []latency.Tick
	for i, pc := range Percentiles {
		ticks = append(ticks, latency.Tick{V: float64(i + 1), Label: pc.Name})
	}
	pn := latency.Panel{Title: "SET latency percentiles (solid: during BGSAVE, dashed: outside)", XLabel: "percentile", YLabel: "microseconds (log)", LogY: true, XTicks: ticks}
	tl := latency.Panel{Title: "round 1: slowest SET per 10 ms against time since BGSAVE was called", XLabel: "ms since BGSAVE was called", YLabel: "microseconds (log)", LogY: true}
	palette := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}
	for i, s := range ss {
		c := palette[i%len(palette)]
		for k, cl := range s.Classes[:2] {
			if len(cl.Lat) == 0 {
				continue
			}
			l := latency.Line{Name: s.Name + [2]string{" outside", " during"}[k], Color: c, Dashed: k == 0}
			for j, pc := range Percentiles {
				l.Points = append(l.Points, latency.Point{X: float64(j + 1), Y: float64(cl.Percentile(pc.P)) / 1e3})
			}
			pn.Lines = append(pn.Lines, l)
		}
		if len(s.Timeline) > 0 {
			done := 0.0
			if len(s.Rounds) > 0 {
				done = float64(s.Rounds[0].BgDone-s.Rounds[0].BgInv) / 1e6
			}
			tl.Lines = append(tl.Lines, latency.Line{Name: fmt.Sprintf("%s (child done %.0f ms)", s.Name, done), Color: c, Points: s.Timeline})
		}
	}
	p.Panels = append(p.Panels, pn, tl)
	return p
}
