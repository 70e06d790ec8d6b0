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
	"github.com/forkfuzz/forkfuzz/campaign/latency"
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

func cmdBenchFork(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench fork", stderr)
	var series listFlag
	fs.Var(&series, "series", "a curve, NAME=TARGET[,pages=4k|thp][,kernel=PATH][,memory=MiB][,cmdline=WORD][,write=PATH:VALUE] (TARGET native or vm; repeatable; default host-4k and host-thp on the host)")
	sizesF := fs.String("sizes", "4M,16M,64M,256M,1G", "resident sizes, comma-separated (multiples of 2M)")
	reps := fs.Int("reps", 5, "forks per size and series")
	baseline := fs.String("baseline", "", "the series the others are compared with (default: the first)")
	var tests listFlag
	fs.Var(&tests, "test", "a series under test for the gate (repeatable; default: every series but the baseline)")
	maxRatio := fs.Float64("max-ratio", 0, "gate: exit 1 when a series under test's median is more than this times the baseline's at --at-size (0: no gate)")
	atSize := fs.String("at-size", "", "gate: the size compared (needs --max-ratio)")
	metricF := fs.String("metric", "fork", "gate metric: fork, stall, stall-max, ready, read (needs --max-ratio)")
	csvOut := fs.String("csv", "", "write every fork as a CSV row here")
	svgOut := fs.String("svg", "", "write the plot here")
	accel := fs.String("accel", "auto", "VM accelerator: auto, kvm, tcg")
	quiet := fs.Bool("q", false, "no progress lines")
	positive(fs, "reps")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	if *maxRatio == 0 {
		// The gate's other flags without the gate would be ignored.
		var gateOnly []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "at-size" || f.Name == "test" || f.Name == "metric" {
				gateOnly = append(gateOnly, "--"+f.Name)
			}
		})
		if len(gateOnly) > 0 {
			fmt.Fprintf(stderr, "forkfuzz bench fork: %s: a flag of the latency gate, which is off without --max-ratio\n", strings.Join(gateOnly, ", "))
			return exitError
		}
	}
	if len(series) == 0 {
		series = listFlag{"host-4k=native,pages=4k", "host-thp=native,pages=thp"}
	}
	var cfg latency.Config
	for _, s := range series {
		sr, err := latency.ParseSeries(s)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --series:", err)
			return exitError
		}
		for _, o := range cfg.Series {
			if o.Name == sr.Name {
				fmt.Fprintf(stderr, "forkfuzz bench fork: --series: name %s used twice\n", sr.Name)
				return exitError
			}
		}
		cfg.Series = append(cfg.Series, sr)
	}
	for _, f := range strings.Split(*sizesF, ",") {
		n, err := latency.ParseSize(f)
		if err == nil && n%(2<<20) != 0 {
			err = fmt.Errorf("size %q is not a multiple of 2M", f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --sizes:", err)
			return exitError
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	base := 0
	if *baseline != "" {
		base = -1
		for i, s := range cfg.Series {
			if s.Name == *baseline {
				base = i
			}
		}
		if base < 0 {
			fmt.Fprintf(stderr, "forkfuzz bench fork: --baseline: no series named %q\n", *baseline)
			return exitError
		}
	}
	metric, err := latency.MetricByName(*metricF)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz bench fork: --metric:", err)
		return exitError
	}
	var gateSize int64
	if *maxRatio > 0 {
		if *atSize == "" {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --max-ratio needs --at-size")
			return exitError
		}
		if gateSize, err = latency.ParseSize(*atSize); err != nil {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --at-size:", err)
			return exitError
		}
		found := false
		for _, s := range cfg.Sizes {
			found = found || s == gateSize
		}
		if !found {
			fmt.Fprintf(stderr, "forkfuzz bench fork: --at-size %s is not one of --sizes\n", *atSize)
			return exitError
		}
		if len(cfg.Series) < 2 {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --max-ratio needs a baseline and a series under test")
			return exitError
		}
	}
	cfg.Reps = *reps
	cfg.Accel = *accel
	if cfg.Self, err = os.Executable(); err != nil {
		fmt.Fprintln(stderr, "forkfuzz bench fork:", err)
		return exitError
	}
	if !*quiet {
		cfg.Log = stderr
	}
	start := time.Now()
	all, err := latency.Run(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz bench fork:", err)
		return exitError
	}
	// A series that failed (a kernel report in its VM) is a finding; the
	// others are still reported.
	findings := 0
	for _, r := range all {
		var kr *vm.KernelReportError
		switch {
		case r.Err == nil:
		case errors.As(r.Err, &kr):
			findings++
			fmt.Fprintf(stdout, "FINDING: series %s: kernel report in the VM while benchmarking: %s\n%s\n", r.Series.Name, kr.Title, kr.Report)
		default:
			fmt.Fprintf(stderr, "forkfuzz bench fork: series %s: %v\n", r.Series.Name, r.Err)
			return exitError
		}
	}
	baseName := all[base].Series.Name
	res := latency.Measured(all)
	base = -1
	for i, r := range res {
		if r.Series.Name == baseName {
			base = i
		}
	}
	if base < 0 {
		fmt.Fprintf(stderr, "forkfuzz bench fork: the baseline %s has no measurements\n", baseName)
		return exitFindings
	}
	host, _ := os.Hostname()
	notes := []string{fmt.Sprintf("%s, %d CPUs, %s; %d forks per point; measured %s on a shared, loaded machine",
		host, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), *reps, time.Since(start).Round(time.Second))}
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
	for _, n := range notes {
		fmt.Fprintln(stdout, "# "+n)
	}
	latency.WriteTable(stdout, res, base)
	if *csvOut != "" {
		if err := writeFileWith(*csvOut, func(w io.Writer) error { return latency.WriteCSV(w, res) }); err != nil {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --csv:", err)
			return exitError
		}
	}
	if *svgOut != "" {
		if err := writeFileWith(*svgOut, latency.BenchPlot(res, base, notes).WriteSVG); err != nil {
			fmt.Fprintln(stderr, "forkfuzz bench fork: --svg:", err)
			return exitError
		}
	}
	if *maxRatio > 0 {
		fails, err := latency.Gate(res, base, tests, gateSize, metric, *maxRatio)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz bench fork:", err)
			return exitError
		}
		for _, f := range fails {
			fmt.Fprintln(stdout, "LATENCY GATE FAILED: "+f.String())
		}
		if len(fails) > 0 || findings > 0 {
			return exitFindings
		}
		fmt.Fprintf(stdout, "latency gate passed: every series under test within %.2fx of %s at %s (%s)\n", *maxRatio, res[base].Series.Name, *atSize, metric.Name)
	}
	if findings > 0 {
		return exitFindings
	}
	return exitClean
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
