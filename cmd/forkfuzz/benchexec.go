package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func init() {
	subcommands["bench"] = append(subcommands["bench"], command{name: "exec", args: "[flags]",
		help: "programs/s of a fixed set of programs on a target with each per-program cost (KCOV, page census) switched off in turn, side by side", run: cmdBenchExec})
}

// execCost is one configuration of bench exec: a name, and what the
// run's options become.
type execCost struct {
	name string
	set  func(*agents.Options)
}

// execCosts are the per-program costs bench exec switches off in turn.
var execCosts = []execCost{
	{"all on", func(*agents.Options) {}},
	{"no kcov", func(o *agents.Options) { o.NoCover = true }},
	{"no census", func(o *agents.Options) { o.NoForkPages = true }},
	{"neither", func(o *agents.Options) { o.NoCover, o.NoForkPages = true, true }},
	{"1 word/view", func(o *agents.Options) { o.WordCap = 1 }},
	// Views with words only where threads race (run --digests-first,
	// agents.Options.DigestsFirst).
	{"digests first", func(o *agents.Options) { o.DigestsFirst = true }},
	{"heap THP", func(o *agents.Options) { o.HeapTHP = true }},
	{"sync drain", func(o *agents.Options) { o.SyncKcovDrain = true }},
	// Children's bigger KCOV buffers (executor.Options.ChildKcovGrow).
	{"child grow all", func(o *agents.Options) { o.ChildKcovGrow = executor.GrowAll }},
	{"child grow ops", func(o *agents.Options) { o.ChildKcovGrow = executor.GrowOps }},
	{"child grow none", func(o *agents.Options) { o.ChildKcovGrow = executor.GrowNone }},
	// A fresh executor for every program (executor.Options.RecyclePTEKB
	// 1): what a long-lived executor's page tables cost.
	{"fresh executor", func(o *agents.Options) { o.RecyclePTEKB = 1 }},
}

// execRow is one configuration's measurements.
type execRow struct {
	name   string
	runs   int
	errs   int
	total  time.Duration
	phases map[string]int64 // guest microseconds by phase
	work   map[string]int64 // guest microseconds by activity (obs.Observation.Work)
	mem    obs.ExecutorMem  // summed over memN runs that reported it
	memN   int
	// pteMin and pteMax bound the page tables over those runs: a
	// long-lived executor's grow (docs/throughput.md).
	pteMin, pteMax int64
	// Kernel coverage: runs that had it, their edges summed, every edge
	// seen in any run, and runs whose buffer or set filled.
	covRuns, edgeSum, filled int
	edges                    map[uint32]struct{}
	// needWords counts digests-first runs whose verdict needs every
	// word (a campaign runs them again: campaign.NeedsWords).
	needWords int
	digests   bool
}

func cmdBenchExec(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench exec", stderr)
	sel := targetSetup(fs, "native")
	n := fs.Int("programs", 12, "programs to run (campaign.NewProgram(seed, i) for i < N)")
	seed := fs.Uint64("seed", 1, "seed of the programs")
	rounds := fs.Int("rounds", 2, "how often each program runs under each configuration (interleaved)")
	profile := fs.String("profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	only := fs.String("configs", "", "comma-separated configurations to run (default: all): "+execCostNames())
	positive(fs, "programs", "rounds")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	w, err := gen.Profile(*profile)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz bench exec: --profile:", err)
		return exitError
	}
	costs, err := selectExecCosts(*only)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz bench exec: --configs:", err)
		return exitError
	}
	t, err := sel.Open()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz bench exec:", err)
		return exitError
	}
	defer t.Close()
	var progs []*prog.Program
	for i := int64(0); i < int64(*n); i++ {
		progs = append(progs, campaign.NewProgram(*seed, i, nil, w))
	}
	rows := benchExec(t, progs, costs, *rounds, func(r, i int, c string, d time.Duration, err error) {
		if err != nil {
			fmt.Fprintf(stderr, "round %d program %d %s: %v\n", r, i, c, err)
		}
	})
	fmt.Fprintf(stdout, "bench exec: %s, %d programs (seed %d, profile %s) x %d rounds, configurations interleaved per program\n",
		t.Name(), len(progs), *seed, *profile, *rounds)
	printExecRows(stdout, rows)
	return exitClean
}

// benchExec runs every program under every configuration of execCosts,
// rounds times, interleaved (program by program, configuration by
// configuration) so that a change of the machine's load weighs on all
// alike, and returns each configuration's figures. Each program runs once
// unmeasured first (its first run pays for memory the executor then
// reuses), and the configuration that goes first rotates from program to
// program and round to round: with a fixed order the first configuration
// was the slowest row even when it equalled another (docs/throughput.md).
func benchExec(t agents.Target, progs []*prog.Program, execCosts []execCost, rounds int, each func(r, i int, c string, d time.Duration, err error)) []*execRow {
	rows := make([]*execRow, len(execCosts))
	for k, c := range execCosts {
		rows[k] = &execRow{name: c.name, phases: map[string]int64{}, work: map[string]int64{}, edges: map[uint32]struct{}{}}
	}
	for _, p := range progs {
		t.Run(p, agents.Options{}) // warm-up, not counted
	}
	for r := 0; r < rounds; r++ {
		for i, p := range progs {
			for j := range execCosts {
				k := (j + i + r) % len(execCosts)
				c := execCosts[k]
				var opt agents.Options
				c.set(&opt)
				t0 := time.Now()
				o, err := t.Run(p, opt)
				d := time.Since(t0)
				if each != nil {
					each(r, i, c.name, d, err)
				}
				if _, ev := agents.AsEvent(err); err != nil && !ev {
					rows[k].errs++
					continue
				}
				rows[k].runs++
				rows[k].total += d
				if opt.DigestsFirst {
					rows[k].digests = true
					if v, herr := judge.Judge(p, o, err); herr == nil && campaign.NeedsWords(v) {
						rows[k].needWords++
					}
				}
				if o != nil {
					rows[k].addCover(o.Cover)
					for ph, us := range o.Phases {
						rows[k].phases[ph] += us
					}
					for w, us := range o.Work {
						rows[k].work[w] += us
					}
					if m := o.ExecutorMem; m != nil {
						rows[k].mem.RssAnonKB += m.RssAnonKB
						rows[k].mem.PTEKB += m.PTEKB
						rows[k].mem.HeapKB += m.HeapKB
						rows[k].mem.StackKB += m.StackKB
						if rows[k].memN == 0 || m.PTEKB < rows[k].pteMin {
							rows[k].pteMin = m.PTEKB
						}
						rows[k].pteMax = max(rows[k].pteMax, m.PTEKB)
						rows[k].memN++
					}
				}
			}
		}
	}
	return rows
}

// addCover counts one run's kernel coverage.
func (r *execRow) addCover(c *obs.Coverage) {
	if !c.Available() {
		return
	}
	r.covRuns++
	r.edgeSum += len(c.Edges)
	if c.Overflow {
		r.filled++
	}
	for _, e := range c.Edges {
		r.edges[e] = struct{}{}
	}
}

// printExecRows prints programs/s per configuration and its ratio to the
// first (everything on), and the guest's phases per program.
func printExecRows(w io.Writer, rows []*execRow) {
	rate := func(r *execRow) float64 {
		if r.total <= 0 {
			return 0
		}
		return float64(r.runs) / r.total.Seconds()
	}
	base := rate(rows[0])
	fmt.Fprintf(w, "%-16s %6s %10s %8s  %s\n", "config", "runs", "programs/s", "ratio", "guest phases per program (ms)")
	for _, r := range rows {
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2fx", rate(r)/base)
		}
		errs := ""
		if r.errs > 0 {
			errs = fmt.Sprintf(" (%d harness errors, not counted)", r.errs)
		}
		fmt.Fprintf(w, "%-16s %6d %10.2f %8s  %s%s\n", r.name, r.runs, rate(r), ratio, perProgram(r.phases, r.runs), errs)
	}
	header := "\nthe executor's own memory when a program starts (mean; every fork of the main process copies the page tables of its private resident memory):\n"
	for _, r := range rows {
		if n := int64(r.memN); n > 0 {
			fmt.Fprintf(w, "%s%-16s  RssAnon %.1f MiB, page tables %d KiB (%d-%d), Go heap %.1f MiB, stacks %.1f MiB\n", header, r.name,
				float64(r.mem.RssAnonKB/n)/1024, r.mem.PTEKB/n, r.pteMin, r.pteMax, float64(r.mem.HeapKB/n)/1024, float64(r.mem.StackKB/n)/1024)
			header = ""
		}
	}
	header = "\nkernel coverage (KCOV edges; a configuration that collects less shows it here):\n"
	for _, r := range rows {
		if r.covRuns > 0 {
			fmt.Fprintf(w, "%s%-16s  %d per program (mean of %d runs), %d over all its runs, %d runs filled a buffer or set\n", header, r.name,
				r.edgeSum/r.covRuns, r.covRuns, len(r.edges), r.filled)
			header = ""
		}
	}
	for _, r := range rows {
		if r.digests {
			fmt.Fprintf(w, "\n%s: %d of %d runs needed every word (a campaign runs those again: not in the figures above)\n", r.name, r.needWords, r.runs)
		}
	}
	header = "\nwhere the program phase went, summed over its processes (ms per program; a fork includes its census and evidence, a wait its child's run):\n"
	for _, r := range rows {
		if len(r.work) > 0 {
			fmt.Fprintf(w, "%s%-16s  %s\n", header, r.name, perProgram(r.work, r.runs))
			header = ""
		}
	}
}

// perProgram lists m's entries (microseconds summed over runs) as
// milliseconds per run, largest first.
func perProgram(m map[string]int64, runs int) string {
	if runs <= 0 {
		return ""
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	var parts []string
	for _, k := range ks {
		if ms := float64(m[k]) / 1e3 / float64(runs); ms >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, ms))
		}
	}
	return strings.Join(parts, ", ")
}

func execCostNames() string {
	var names []string
	for _, c := range execCosts {
		names = append(names, fmt.Sprintf("%q", c.name))
	}
	return strings.Join(names, ", ")
}

// selectExecCosts returns the configurations named in list (comma-separated;
// empty: all), in execCosts' order.
func selectExecCosts(list string) ([]execCost, error) {
	if strings.TrimSpace(list) == "" {
		return execCosts, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.ContainsFunc(execCosts, func(c execCost) bool { return c.name == n }) {
			return nil, fmt.Errorf("unknown configuration %q (want one of %s)", n, execCostNames())
		}
		want[n] = true
	}
	var out []execCost
	for _, c := range execCosts {
		if want[c.name] {
			out = append(out, c)
		}
	}
	return out, nil
}
