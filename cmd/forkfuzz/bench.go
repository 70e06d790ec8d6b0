package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/bench/latency"
)

func init() {
	commands = append(commands,
		command{name: "bench", args: "fork|mutants [flags]", help: "fork latency against resident memory (host, QEMU VMs); CSV, SVG, a ratio gate; or the kernel mutation benchmark (mutants)", run: cmdBench},
		command{name: "bench-worker", help: "measure forks (started by forkfuzz bench itself)", run: cmdBenchWorker, hidden: true})
	subcommands["bench"] = []command{
		{name: "fork", args: "[flags]", help: "fork latency against resident memory (host, QEMU VMs): a table, CSV, SVG and a ratio gate", run: cmdBenchFork},
		{name: "mutants", args: "[flags]", help: "the kernel mutation benchmark: hunt every bug planted by 'forkfuzz kernel build --mutants', in QEMU", run: cmdBenchMutants},
	}
}

func cmdBenchWorker(args []string, stdout, stderr io.Writer) int {
	if err := executor.ReexecWithGODEBUG(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(stderr, "bench-worker:", err)
		return exitError
	}
	var kind struct {
		Redis json.RawMessage `json:"redis"`
	}
	json.Unmarshal(body, &kind)
	if len(kind.Redis) > 0 {
		err = redisWorker(body, stdout)
	} else {
		err = latency.WorkerMain(bytes.NewReader(body), stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitClean
}

func cmdBench(args []string, stdout, stderr io.Writer) int {
	return runSub("bench", args, stdout, stderr)
}

// benchForkOptions are the flags of forkfuzz bench fork.
type benchForkOptions struct {
	fs                                        *flag.FlagSet
	series, tests                             listFlag
	sizes, baseline, atSize, metric, csv, svg string
	accel                                     string
	reps                                      int
	maxRatio                                  float64
	quiet                                     bool
}

// benchForkPlan is what bench fork runs and gates: the benchmark, the
// index of the baseline series, and the gate's metric and size.
type benchForkPlan struct {
	cfg      latency.Config
	base     int
	metric   latency.Metric
	gateSize int64
}

func cmdBenchFork(args []string, stdout, stderr io.Writer) int {
	o := benchForkFlags(stderr)
	if err := parseArgs(o.fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "forkfuzz bench fork:", err)
		return exitError
	}
	plan, err := o.plan(stderr)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	all, err := latency.Run(plan.cfg)
	if err != nil {
		return fail(err)
	}
	findings, err := benchFindings(all, stdout)
	if err != nil {
		return fail(err)
	}
	baseName := all[plan.base].Series.Name
	res := latency.Measured(all)
	plan.base = -1
	for i, r := range res {
		if r.Series.Name == baseName {
			plan.base = i
		}
	}
	if plan.base < 0 {
		fmt.Fprintf(stderr, "forkfuzz bench fork: the baseline %s has no measurements\n", baseName)
		return exitFindings
	}
	notes := benchNotes(res, o.reps, time.Since(start))
	code, err := o.report(stdout, res, plan, notes, findings)
	if err != nil {
		return fail(err)
	}
	return code
}

// benchForkFlags declares the flags of forkfuzz bench fork.
func benchForkFlags(stderr io.Writer) *benchForkOptions {
	o := &benchForkOptions{fs: newFlags("bench fork", stderr)}
	fs := o.fs
	fs.Var(&o.series, "series", "a curve, NAME=TARGET[,pages=4k|thp][,kernel=PATH][,memory=MiB][,cmdline=WORD][,write=PATH:VALUE] (TARGET native or vm; repeatable; default host-4k and host-thp on the host)")
	fs.StringVar(&o.sizes, "sizes", "4M,16M,64M,256M,1G", "resident sizes, comma-separated (multiples of 2M)")
	fs.IntVar(&o.reps, "reps", 5, "forks per size and series")
	fs.StringVar(&o.baseline, "baseline", "", "the series the others are compared with (default: the first)")
	fs.Var(&o.tests, "test", "a series under test for the gate (repeatable; default: every series but the baseline)")
	fs.Float64Var(&o.maxRatio, "max-ratio", 0, "gate: exit 1 when a series under test's median is more than this times the baseline's at --at-size (0: no gate)")
	fs.StringVar(&o.atSize, "at-size", "", "gate: the size compared (needs --max-ratio)")
	fs.StringVar(&o.metric, "metric", "fork", "gate metric: fork, stall, stall-max, ready, read (needs --max-ratio)")
	fs.StringVar(&o.csv, "csv", "", "write every fork as a CSV row here")
	fs.StringVar(&o.svg, "svg", "", "write the plot here")
	fs.StringVar(&o.accel, "accel", "auto", "VM accelerator: auto, kvm, tcg")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines")
	positive(fs, "reps")
	return o
}

// plan checks the flags and builds the benchmark.
func (o *benchForkOptions) plan(stderr io.Writer) (*benchForkPlan, error) {
	if o.maxRatio == 0 {
		// The gate's other flags without the gate would be ignored.
		var gateOnly []string
		o.fs.Visit(func(f *flag.Flag) {
			if f.Name == "at-size" || f.Name == "test" || f.Name == "metric" {
				gateOnly = append(gateOnly, "--"+f.Name)
			}
		})
		if len(gateOnly) > 0 {
			return nil, fmt.Errorf("%s: a flag of the latency gate, which is off without --max-ratio", strings.Join(gateOnly, ", "))
		}
	}
	if len(o.series) == 0 {
		o.series = listFlag{"host-4k=native,pages=4k", "host-thp=native,pages=thp"}
	}
	p := &benchForkPlan{}
	var err error
	if p.cfg.Series, err = parseSeries(o.series); err != nil {
		return nil, err
	}
	if p.cfg.Sizes, err = parseSizes(o.sizes); err != nil {
		return nil, err
	}
	if o.baseline != "" {
		p.base = -1
		for i, s := range p.cfg.Series {
			if s.Name == o.baseline {
				p.base = i
			}
		}
		if p.base < 0 {
			return nil, fmt.Errorf("--baseline: no series named %q", o.baseline)
		}
	}
	if p.metric, err = latency.MetricByName(o.metric); err != nil {
		return nil, fmt.Errorf("--metric: %v", err)
	}
	if o.maxRatio > 0 {
		if p.gateSize, err = o.gateSize(p.cfg); err != nil {
			return nil, err
		}
	}
	p.cfg.Reps = o.reps
	p.cfg.Accel = o.accel
	if p.cfg.Self, err = os.Executable(); err != nil {
		return nil, err
	}
	if !o.quiet {
		p.cfg.Log = stderr
	}
	return p, nil
}

// parseSeries parses the --series flags; names are unique.
func parseSeries(flags []string) ([]latency.Series, error) {
	var series []latency.Series
	for _, s := range flags {
		sr, err := latency.ParseSeries(s)
		if err != nil {
			return nil, fmt.Errorf("--series: %v", err)
		}
		for _, o := range series {
			if o.Name == sr.Name {
				return nil, fmt.Errorf("--series: name %s used twice", sr.Name)
			}
		}
		series = append(series, sr)
	}
	return series, nil
}

// parseSizes parses --sizes: multiples of 2M.
func parseSizes(list string) ([]int64, error) {
	var sizes []int64
	for _, f := range strings.Split(list, ",") {
		n, err := latency.ParseSize(f)
		if err == nil && n%(2<<20) != 0 {
			err = fmt.Errorf("size %q is not a multiple of 2M", f)
		}
		if err != nil {
			return nil, fmt.Errorf("--sizes: %v", err)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// gateSize is --at-size, one of cfg's sizes, for a gate that has a
// series to compare with the baseline.
func (o *benchForkOptions) gateSize(cfg latency.Config) (int64, error) {
	if o.atSize == "" {
		return 0, errors.New("--max-ratio needs --at-size")
	}
	size, err := latency.ParseSize(o.atSize)
	if err != nil {
		return 0, fmt.Errorf("--at-size: %v", err)
	}
	found := false
	for _, s := range cfg.Sizes {
		found = found || s == size
	}
	if !found {
		return 0, fmt.Errorf("--at-size %s is not one of --sizes", o.atSize)
	}
	if len(cfg.Series) < 2 {
		return 0, errors.New("--max-ratio needs a baseline and a series under test")
	}
	return size, nil
}

// benchFindings prints the series that failed with a kernel report in
// their VM (findings; the others are still reported) and counts them;
// any other failure is an error.
func benchFindings(all []latency.Result, stdout io.Writer) (int, error) {
	findings := 0
	for _, r := range all {
		var kr *vm.KernelReportError
		switch {
		case r.Err == nil:
		case errors.As(r.Err, &kr):
			findings++
			fmt.Fprintf(stdout, "FINDING: series %s: kernel report in the VM while benchmarking: %s\n%s\n", r.Series.Name, kr.Title, kr.Report)
		default:
			return 0, fmt.Errorf("series %s: %v", r.Series.Name, r.Err)
		}
	}
	return findings, nil
}

// benchNotes are the lines that say where and how the benchmark ran: the
// machine, then each series' target, kernel and memory set-up.
func benchNotes(res []latency.Result, reps int, took time.Duration) []string {
	host, _ := os.Hostname()
	notes := []string{fmt.Sprintf("%s, %d CPUs, %s; %d forks per point; measured %s on a shared, loaded machine",
		host, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), reps, took.Round(time.Second))}
	for _, r := range res {
		acc := ""
		if r.Accel != "" {
			acc = ", " + r.Accel
		}
		w := ""
		if len(r.Resp.Writes) > 0 {
			w = ", " + strings.Join(r.Resp.Writes, "; ")
		}
		if r.Series.Cmdline != "" {
			acc += ", cmdline " + r.Series.Cmdline
		}
		notes = append(notes, fmt.Sprintf("%s: %s, kernel %s%s, THP %s%s", r.Series.Name, r.Series.Target, r.Resp.Uname, acc, r.Resp.THPMode, w))
	}
	return notes
}

// report prints the notes and the table, writes the CSV and the plot,
// applies the gate and returns the exit status.
func (o *benchForkOptions) report(stdout io.Writer, res []latency.Result, p *benchForkPlan, notes []string, findings int) (int, error) {
	for _, n := range notes {
		fmt.Fprintln(stdout, "# "+n)
	}
	latency.WriteTable(stdout, res, p.base)
	if o.csv != "" {
		if err := writeFileWith(o.csv, func(w io.Writer) error { return latency.WriteCSV(w, res) }); err != nil {
			return exitError, fmt.Errorf("--csv: %v", err)
		}
	}
	if o.svg != "" {
		if err := writeFileWith(o.svg, latency.BenchPlot(res, p.base, notes).WriteSVG); err != nil {
			return exitError, fmt.Errorf("--svg: %v", err)
		}
	}
	if o.maxRatio > 0 {
		fails, err := latency.Gate(res, p.base, o.tests, p.gateSize, p.metric, o.maxRatio)
		if err != nil {
			return exitError, err
		}
		for _, f := range fails {
			fmt.Fprintln(stdout, "LATENCY GATE FAILED: "+f.String())
		}
		if len(fails) > 0 || findings > 0 {
			return exitFindings, nil
		}
		fmt.Fprintf(stdout, "latency gate passed: every series under test within %.2fx of %s at %s (%s)\n", o.maxRatio, res[p.base].Series.Name, o.atSize, p.metric.Name)
	}
	if findings > 0 {
		return exitFindings, nil
	}
	return exitClean, nil
}

func writeFileWith(path string, f func(io.Writer) error) error {
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f(w); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
