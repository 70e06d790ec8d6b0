package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/bench/mutbench"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// mutbenchOptions are the flags of forkfuzz bench mutants: the
// benchmark's Config (its value fields bound to flags) and the rest.
type mutbenchOptions struct {
	fs          *flag.FlagSet
	sel         *targetSel
	cfg         mutbench.Config
	names       listFlag
	noBase      bool
	profile     string
	list, quiet bool
	reach       int
	seedCorpus  *string
	noStates    *bool
	// seeds and modes (--seeds, --modes) run the table once per seed
	// and mode (mutbench.RunMany); tables (--table) only print the
	// spread of kept results.
	seeds, modes string
	tables       listFlag
	// baseCmdline is --kernel-cmdline as given; each row adds its mutant.
	baseCmdline string
}

// cmdBenchMutants is `forkfuzz bench mutants`: the kernel mutation
// benchmark (bench/mutbench) on a kernel built with
// `forkfuzz kernel build --mutants`.
func cmdBenchMutants(args []string, stdout, stderr io.Writer) int {
	o := mutbenchFlags(stderr)
	if err := parseArgs(o.fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "forkfuzz bench mutants: %v\n", err)
		return exitError
	}
	if o.list {
		for _, m := range kernel.Mutants {
			fmt.Fprintf(stdout, "%2d %-20s %-18s %-22s %s\n", m.Num, m.Name, m.File, m.Oracle, m.Breaks)
		}
		return exitClean
	}
	if o.reach > 0 {
		if err := o.printReach(stdout); err != nil {
			return fail(err)
		}
		return exitClean
	}
	if len(o.tables) > 0 {
		recs, err := mutbench.LoadRecords(o.tables)
		if err != nil {
			return fail(fmt.Errorf("--table: %v", err))
		}
		if len(recs) == 0 {
			return fail(fmt.Errorf("--table %s: no results", o.tables.String()))
		}
		fmt.Fprint(stdout, mutbench.Spread(recs))
		return exitClean
	}
	seeds, modes, err := o.runs()
	if err != nil {
		return fail(err)
	}
	if err := o.config(); err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := &o.cfg
	if !o.quiet {
		cfg.Log, cfg.Progress = stderr, stderr
	}
	if cfg.SeedCorpus != "" {
		fmt.Fprintf(stdout, "bench mutants: every row starts from the corpus in %s\n", cfg.SeedCorpus)
	}
	if seeds != nil {
		fmt.Fprintf(stdout, "bench mutants: %d mutants, budget %v each, seeds %v, modes %v, kernel %s, workdir %s (results kept in %s)\n",
			len(cfg.Mutants), cfg.Budget, seeds, modes, o.sel.flagValue("kernel"), cfg.Workdir, mutbench.ResultsFile)
		recs, err := mutbench.RunMany(ctx, *cfg, seeds, modes, stdout)
		switch {
		case err != nil:
			return fail(err)
		case !mutbench.AllClean(recs):
			return exitFindings
		}
		return exitClean
	}
	fmt.Fprintf(stdout, "bench mutants: %d mutants, budget %v each, seed %d, %s, kernel %s, workdir %s\n", len(cfg.Mutants), cfg.Budget, cfg.Seed, guidance(cfg.Blind), o.sel.flagValue("kernel"), cfg.Workdir)
	cfg.Results = filepath.Join(cfg.Workdir, mutbench.ResultsFile)
	rs := mutbench.Run(ctx, *cfg, stdout)
	errs := 0
	for _, r := range rs {
		if r.Err != nil {
			errs++
			fmt.Fprintf(stderr, "forkfuzz bench mutants: %s: %v\n", r.Name, r.Err)
		}
	}
	switch {
	case ctx.Err() != nil, errs == len(rs):
		return exitError
	case !mutbench.Clean(rs):
		return exitFindings
	}
	return exitClean
}

// mutbenchFlags declares the flags of forkfuzz bench mutants.
func mutbenchFlags(stderr io.Writer) *mutbenchOptions {
	o := &mutbenchOptions{fs: newFlags("bench mutants", stderr)}
	fs, c := o.fs, &o.cfg
	o.sel = targetSetup(fs, "qemu")
	fs.Var(&o.names, "mutants", "a mutant to hunt, by name or number (repeatable or comma-separated; default: all; 'none' runs only the unmutated build)")
	fs.DurationVar(&c.Budget, "budget", 10*time.Minute, "time bound per mutant, to its first finding (the unmutated build gets the same)")
	fs.IntVar(&c.Programs, "programs", 0, "program bound per mutant (0: none)")
	fs.Uint64Var(&c.Seed, "seed", 1, "campaign seed (the same for every row)")
	fs.StringVar(&c.Workdir, "workdir", "", "where each row's findings go (WORKDIR/MUTANT/findings; default: a new forkfuzz-mutbench-* directory in $TMPDIR, printed)")
	fs.BoolVar(&o.noBase, "no-baseline", false, "skip the unmutated build's run")
	fs.IntVar(&c.MinimizeRuns, "minimize-runs", 40, "target runs spent minimizing each finding")
	fs.DurationVar(&c.MinimizeTime, "minimize-time", 3*time.Minute, "time spent minimizing each finding (then 5 replays; aiming a fault-injection finding at its recorded site, up to 25 runs, comes on top)")
	fs.StringVar(&o.profile, "profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	fs.BoolVar(&o.list, "list", false, "list the mutants and exit")
	fs.IntVar(&o.reach, "reach", 0, "no kernel: estimate how many of the campaign's first N generated programs meet each mutant's trigger condition, and exit")
	fs.BoolVar(&o.quiet, "q", false, "no campaign log or progress lines")
	fs.BoolVar(&c.Blind, "blind", false, "campaigns ignore what runs reached (KCOV edges, memory states), to compare time to each bug with guided ones")
	o.noStates = noStatesFlag(fs)
	o.seedCorpus = seedCorpusFlag(fs)
	fs.StringVar(&o.seeds, "seeds", "", "run the table once per seed: a list of seeds and ranges (1-5, or 2,7,9-11); rows go to WORKDIR/"+mutbench.ResultsFile+", and a run of the same --workdir again skips the rows it holds")
	fs.StringVar(&o.modes, "modes", "", "with --seeds, run each seed in these modes in turn: "+strings.Join(mutbench.Modes, ", ")+" (comma-separated; default: the one --blind and --no-states give)")
	fs.Var(&o.tables, "table", "print the median and range over seeds and modes of the results in this "+mutbench.ResultsFile+" (or a benchmark's WORKDIR holding one) and exit; repeatable to merge runs")
	positive(fs, "budget")
	return o
}

// runs parses --seeds and --modes: nil seeds for a single run (--seed).
func (o *mutbenchOptions) runs() (seeds []uint64, modes []string, err error) {
	set := map[string]bool{}
	o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.seeds == "" {
		if o.modes != "" {
			return nil, nil, errors.New("--modes needs --seeds")
		}
		return nil, nil, nil
	}
	if set["seed"] {
		return nil, nil, errors.New("--seed and --seeds: give one")
	}
	if seeds, err = parseSeeds(o.seeds); err != nil {
		return nil, nil, fmt.Errorf("--seeds %q: %v", o.seeds, err)
	}
	if o.modes == "" {
		return seeds, []string{mutbench.ModeOf(o.cfg)}, nil
	}
	if set["blind"] || set["no-states"] {
		return nil, nil, errors.New("--modes with --blind or --no-states: name the modes in --modes")
	}
	for _, m := range strings.Split(o.modes, ",") {
		m = strings.TrimSpace(m)
		var c mutbench.Config
		if err := mutbench.SetMode(&c, m); err != nil {
			return nil, nil, fmt.Errorf("--modes: %v", err)
		}
		if slices.Contains(modes, m) {
			return nil, nil, fmt.Errorf("--modes: %s twice", m)
		}
		modes = append(modes, m)
	}
	return seeds, modes, nil
}

// parseSeeds parses a list of seeds and ranges: "1-5", "2,7,9-11".
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil || a == 0 {
			return nil, fmt.Errorf("%q: want a seed of 1 or more", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q: want a range LOW-HIGH with HIGH >= LOW", part)
			}
			if b-a >= 1000 {
				return nil, fmt.Errorf("%q: more than 1000 seeds", part)
			}
		}
		for v := a; v <= b; v++ {
			if slices.Contains(out, v) {
				return nil, fmt.Errorf("seed %d twice", v)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// printReach prints how many of the first --reach programs meet each
// mutant's trigger condition.
func (o *mutbenchOptions) printReach(stdout io.Writer) error {
	w, err := gen.Profile(o.profile)
	if err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	got := mutbench.Reach(mutbench.QEMUWeights(w), o.cfg.Seed, o.reach)
	fmt.Fprintf(stdout, "trigger conditions met by the first %d programs (seed %d, profile %s, as on a default QEMU VM: hugetlb, tmpfs and ext4; fresh programs, no mutation):\n", o.reach, o.cfg.Seed, o.profile)
	for _, m := range kernel.Mutants {
		fmt.Fprintf(stdout, "%-20s %6.1f%%  %s\n", m.Name, 100*float64(got[m.Name])/float64(o.reach), m.Needs)
	}
	return nil
}

// config checks the flags and completes the benchmark's Config: the
// mutants, the generator weights, the target and the workdir.
func (o *mutbenchOptions) config() error {
	cfg, sel := &o.cfg, o.sel
	ms, onlyBase, err := parseMutants(o.names)
	if err != nil {
		return err
	}
	if onlyBase && o.noBase {
		return errors.New("--mutants none with --no-baseline: nothing to run")
	}
	if sel.Kind() != "qemu" {
		return fmt.Errorf("--target %s: the mutants live in a kernel; want --target qemu with --kernel IMAGE from 'forkfuzz kernel build --mutants'", sel.Kind())
	}
	if err := sel.check(); err != nil {
		return err
	}
	if sel.flagValue("kernel") == "" && sel.flagValue("target-file") == "" {
		return errors.New("want --kernel IMAGE (built by 'forkfuzz kernel build --mutants'): the default kernel has no mutants")
	}
	if cfg.Weights, err = gen.Profile(o.profile); err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	if cfg.Workdir == "" {
		// Not the current directory: run from a source checkout, a
		// default there filled the checkout with VM consoles.
		d, err := os.MkdirTemp("", "forkfuzz-mutbench-")
		if err != nil {
			return fmt.Errorf("--workdir: %v", err)
		}
		cfg.Workdir = d
	}
	cfg.Baseline, cfg.Mutants, cfg.Planted, cfg.SeedCorpus, cfg.NoStates = !o.noBase, ms, planted, *o.seedCorpus, *o.noStates
	if err := (&campaign.Config{Blind: cfg.Blind, NoStates: cfg.NoStates}).Validate(); err != nil {
		return flagError(err, campaignFlag)
	}
	o.baseCmdline, cfg.Open = sel.flagValue("kernel-cmdline"), o.openRow
	return nil
}

// parseMutants parses --mutants: the mutants to hunt (all without the
// flag) and whether "none" asked for the unmutated build alone.
func parseMutants(names []string) (ms []kernel.Mutant, onlyBase bool, err error) {
	for _, arg := range names {
		for _, n := range strings.Split(arg, ",") {
			n = strings.TrimSpace(n)
			if n == "none" {
				onlyBase = true
				continue
			}
			m, err := kernel.MutantByName(n)
			if err != nil {
				return nil, false, fmt.Errorf("--mutants: %v", err)
			}
			ms = append(ms, m)
		}
	}
	if len(names) == 0 {
		ms = kernel.Mutants
	}
	return ms, onlyBase, nil
}

// openRow opens the target of one row: the kernel booted with --kernel-cmdline
// and cmdline (the row's mutant), its VM consoles kept in dir.
func (o *mutbenchOptions) openRow(cmdline, dir string) (agents.Target, []string, campaign.KernelID, error) {
	if err := o.fs.Set("kernel-cmdline", strings.TrimSpace(o.baseCmdline+" "+cmdline)); err != nil {
		return nil, nil, campaign.KernelID{}, err
	}
	// Each row's VM consoles stay in its directory: planted reads them.
	if err := o.fs.Set("vm-workdir", filepath.Join(dir, "vm")); err != nil {
		return nil, nil, campaign.KernelID{}, err
	}
	t, err := o.sel.Open()
	if err != nil {
		return nil, nil, campaign.KernelID{}, err
	}
	return t, o.sel.ReplayArgs(t), o.sel.Kernel(t), nil
}

func guidance(blind bool) string {
	if blind {
		return "blind (coverage measured, not used)"
	}
	return "coverage-guided"
}

// planted checks the consoles of a row's VMs (DIR/vm/vm-N/console.log):
// the kernel logs "forkfuzz: mutant N (NAME) planted" when booted with
// forkfuzz_mutant=NAME, and nothing of the kind without it. A kernel built
// without the patch ignores the parameter: its rows fail here instead of
// reporting bugs "not found".
func planted(m kernel.Mutant, dir string) error {
	logs, _ := filepath.Glob(filepath.Join(dir, "vm", "vm-*", "console.log"))
	if len(logs) == 0 {
		return fmt.Errorf("no VM console under %s to check the mutant was planted", filepath.Join(dir, "vm"))
	}
	want := fmt.Sprintf("forkfuzz: mutant %d (%s) planted", m.Num, m.Name)
	booted := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "Linux version") {
			// No kernel ran there: the KVM probe (vm--1) when KVM
			// cannot boot the image, or a VM that died in QEMU.
			continue
		}
		booted++
		has := strings.Contains(string(b), "forkfuzz: mutant ")
		switch {
		case m.Name == mutbench.Baseline && has:
			return fmt.Errorf("%s: the unmutated run's kernel planted a mutant", l)
		case m.Name != mutbench.Baseline && !strings.Contains(string(b), want):
			return fmt.Errorf("%s: no %q: is the image built with 'forkfuzz kernel build --mutants'?", l, want)
		}
	}
	if booted == 0 {
		return fmt.Errorf("no VM console under %s shows a kernel booting: cannot check the mutant was planted", filepath.Join(dir, "vm"))
	}
	return nil
}
