package latency

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

// Metric picks one number of a sample.
type Metric struct {
	Name, Label string
	Get         func(executor.ForkBenchSample) int64
}

// Metrics are the benchmark's measured quantities.
var Metrics = []Metric{
	{"fork", "fork() call", func(s executor.ForkBenchSample) int64 { return s.Fork }},
	{"stall", "parent's first writes, all 2 MiB ranges", func(s executor.ForkBenchSample) int64 { return s.StallTotal }},
	{"stall-max", "parent's slowest first write", func(s executor.ForkBenchSample) int64 { return s.StallMax }},
	{"ready", "fork start to child's first instruction", func(s executor.ForkBenchSample) int64 { return s.ChildReady }},
	{"read", "child reads every page", func(s executor.ForkBenchSample) int64 { return s.ChildRead }},
}

// MetricByName finds a metric.
func MetricByName(n string) (Metric, error) {
	var names []string
	for _, m := range Metrics {
		if m.Name == n {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return Metric{}, fmt.Errorf("unknown metric %q (want one of %s)", n, strings.Join(names, ", "))
}

// Stat is min/median/max of a metric over repetitions (ns).
type Stat struct{ Min, Median, Max int64 }

// StatOf summarises samples.
func StatOf(samples []executor.ForkBenchSample, m Metric) Stat {
	if len(samples) == 0 {
		return Stat{}
	}
	v := make([]int64, len(samples))
	for i, s := range samples {
		v[i] = m.Get(s)
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Stat{v[0], med, v[len(v)-1]}
}

func us(ns int64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) }
func ms(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) }

// MiB formats a size.
func MiB(b int64) string { return strconv.FormatInt(b>>20, 10) }

func pages(s Series) string {
	p := "4k"
	if s.THP {
		p = "thp"
	}
	if s.PinBytes > 0 {
		p += fmt.Sprintf("+pin %dK", s.PinBytes>>10)
	}
	return p
}

// WriteCSV writes one row per fork.
func WriteCSV(w io.Writer, res []Result) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"series", "target", "kernel", "accel", "pages", "size_mib", "rep", "fork_us", "child_ready_us", "stall_total_us", "stall_max_us", "child_read_us", "anon_huge_mib"})
	for _, r := range res {
		for i, sz := range r.Resp.Sizes {
			for rep, s := range r.Resp.Samples[i] {
				cw.Write([]string{r.Series.Name, r.Series.Target, r.Resp.Uname, r.Accel, pages(r.Series), MiB(sz), strconv.Itoa(rep),
					us(s.Fork), us(s.ChildReady), us(s.StallTotal), us(s.StallMax), us(s.ChildRead), MiB(s.THPBytes)})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// baselineStat finds the baseline's stat at a size.
func baselineStat(res []Result, base int, i int, m Metric) Stat {
	return StatOf(res[base].Resp.Samples[i], m)
}

// WriteTable writes the summary: per series and size, min/median/max of
// fork time and medians of the others, and the ratio of medians against
// the baseline (series index base).
func WriteTable(w io.Writer, res []Result, base int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tsize MiB\tfork ms min\tmedian\tmax\tx base\tstall ms\tx base\tready ms\tread ms\tTHP MiB\t")
	fork, stall, ready, read := Metrics[0], Metrics[1], Metrics[3], Metrics[4]
	for _, r := range res {
		for i, sz := range r.Resp.Sizes {
			f := StatOf(r.Resp.Samples[i], fork)
			st := StatOf(r.Resp.Samples[i], stall)
			bf, bs := baselineStat(res, base, i, fork), baselineStat(res, base, i, stall)
			var thp int64
			if n := len(r.Resp.Samples[i]); n > 0 {
				thp = r.Resp.Samples[i][n/2].THPBytes
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Series.Name, MiB(sz), ms(f.Min), ms(f.Median), ms(f.Max),
				ratio(f.Median, bf.Median), ms(st.Median), ratio(st.Median, bs.Median),
				ms(StatOf(r.Resp.Samples[i], ready).Median), ms(StatOf(r.Resp.Samples[i], read).Median), MiB(thp))
		}
	}
	tw.Flush()
}

func ratio(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64)
}

// GateFailure is a series slower than the baseline by more than the
// allowed factor.
type GateFailure struct {
	Series     string
	Size       int64
	Metric     string
	Test, Base int64
	Ratio, Max float64
}

func (g GateFailure) String() string {
	return fmt.Sprintf("series %s at %s MiB: median %s %s ms is %.2fx the baseline's %s ms (allowed %.2fx)",
		g.Series, MiB(g.Size), g.Metric, ms(g.Test), g.Ratio, ms(g.Base), g.Max)
}

// Gate compares every series but the baseline (or only those named in
// tests) with the baseline at size, on metric m.
func Gate(res []Result, base int, tests []string, size int64, m Metric, maxRatio float64) ([]GateFailure, error) {
	idx := -1
	for i, sz := range res[base].Resp.Sizes {
		if sz == size {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("--at-size %s MiB is not one of the measured sizes", MiB(size))
	}
	want := map[string]bool{}
	for _, t := range tests {
		want[t] = true
	}
	b := baselineStat(res, base, idx, m).Median
	var fails []GateFailure
	found := 0
	for i, r := range res {
		if i == base || (len(want) > 0 && !want[r.Series.Name]) {
			continue
		}
		found++
		t := StatOf(r.Resp.Samples[idx], m).Median
		if b > 0 && float64(t)/float64(b) > maxRatio {
			fails = append(fails, GateFailure{r.Series.Name, size, m.Name, t, b, float64(t) / float64(b), maxRatio})
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("the latency gate has no series to compare with the baseline")
	}
	return fails, nil
}
