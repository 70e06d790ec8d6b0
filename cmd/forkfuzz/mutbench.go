package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/mutbench"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// cmdBenchMutants is `forkfuzz bench mutants`: the kernel mutation
// benchmark (campaign/mutbench) on a kernel built with
// `forkfuzz kernel build --mutants`.
func cmdBenchMutants(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench mutants", stderr)
	sel := targetSetup(fs, "qemu")
	var names listFlag
	fs.Var(&names, "mutants", "a mutant to hunt, by name or number (repeatable or comma-separated; default: all; 'none' runs only the unmutated build)")
	budget := fs.Duration("budget", 10*time.Minute, "time bound per mutant, to its first finding (the unmutated build gets the same)")
	programs := fs.Int("programs", 0, "program bound per mutant (0: none)")
	seed := fs.Uint64("seed", 1, "campaign seed (the same for every row)")
	workdir := fs.String("workdir", "", "where each row's findings go (WORKDIR/MUTANT/findings; default: a new forkfuzz-mutbench-* directory in $TMPDIR, printed)")
	noBase := fs.Bool("no-baseline", false, "skip the unmutated build's run")
	minRuns := fs.Int("minimize-runs", 40, "target runs spent minimizing each finding")
	minTime := fs.Duration("minimize-time", 3*time.Minute, "time spent minimizing each finding (then 5 replays)")
	profile := fs.String("profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	list := fs.Bool("list", false, "list the mutants and exit")
	reach := fs.Int("reach", 0, "no kernel: estimate how many of the campaign's first N generated programs meet each mutant's trigger condition, and exit")
	quiet := fs.Bool("q", false, "no campaign log or progress lines")
	blind := fs.Bool("blind", false, "campaigns ignore kernel coverage (KCOV), to compare time to each bug with guided ones")
	seedCorpus := seedCorpusFlag(fs)
	positive(fs, "budget")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "forkfuzz bench mutants: "+format+"\n", args...)
		return exitError
	}
	if *list {
		for _, m := range kernel.Mutants {
			fmt.Fprintf(stdout, "%2d %-20s %-18s %-22s %s\n", m.Num, m.Name, m.File, m.Oracle, m.Breaks)
		}
		return exitClean
	}
	if *reach > 0 {
		w, err := gen.Profile(*profile)
		if err != nil {
			return fail("--profile: %v", err)
		}
		got := mutbench.Reach(w, *seed, *reach)
		fmt.Fprintf(stdout, "trigger conditions met by the first %d programs (seed %d, profile %s; fresh programs, no mutation):\n", *reach, *seed, *profile)
		for _, m := range kernel.Mutants {
			fmt.Fprintf(stdout, "%-20s %6.1f%%  %s\n", m.Name, 100*float64(got[m.Name])/float64(*reach), m.Needs)
		}
		return exitClean
	}
	var ms []kernel.Mutant
	onlyBase := false
	for _, arg := range names {
		for _, n := range strings.Split(arg, ",") {
			n = strings.TrimSpace(n)
			if n == "none" {
				onlyBase = true
				continue
			}
			m, err := kernel.MutantByName(n)
			if err != nil {
				return fail("--mutants: %v", err)
			}
			ms = append(ms, m)
		}
	}
	if len(names) == 0 {
		ms = kernel.Mutants
	}
	if onlyBase && *noBase {
		return fail("--mutants none with --no-baseline: nothing to run")
	}
	if sel.Kind() != "qemu" {
		return fail("--target %s: the mutants live in a kernel; want --target qemu with --kernel IMAGE from 'forkfuzz kernel build --mutants'", sel.Kind())
	}
	if err := sel.check(); err != nil {
		return fail("%v", err)
	}
	if sel.flagValue("kernel") == "" && sel.flagValue("target-file") == "" {
		return fail("want --kernel IMAGE (built by 'forkfuzz kernel build --mutants'): the default kernel has no mutants")
	}
	weights, err := gen.Profile(*profile)
	if err != nil {
		return fail("--profile: %v", err)
	}
	base := sel.flagValue("kernel-cmdline")
	open := func(cmdline, dir string) (agents.Target, []string, campaign.KernelID, error) {
		if err := fs.Set("kernel-cmdline", strings.TrimSpace(base+" "+cmdline)); err != nil {
			return nil, nil, campaign.KernelID{}, err
		}
		// Each row's VM consoles stay in its directory: planted reads them.
		if err := fs.Set("vm-workdir", filepath.Join(dir, "vm")); err != nil {
			return nil, nil, campaign.KernelID{}, err
		}
		t, err := sel.Open()
		if err != nil {
			return nil, nil, campaign.KernelID{}, err
		}
		return t, sel.ReplayArgs(t), sel.Kernel(t), nil
	}
	if *workdir == "" {
		// Not the current directory: run from a source checkout, a
		// default there filled the checkout with VM consoles.
		d, err := os.MkdirTemp("", "forkfuzz-mutbench-")
		if err != nil {
			return fail("--workdir: %v", err)
		}
		*workdir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := mutbench.Config{
		Baseline: !*noBase, Open: open, Seed: *seed, Budget: *budget, Programs: *programs,
		Weights: weights, Workdir: *workdir, MinimizeRuns: *minRuns, MinimizeTime: *minTime, Mutants: ms,
		Planted: planted, Blind: *blind, SeedCorpus: *seedCorpus,
	}
	if !*quiet {
		cfg.Log, cfg.Progress = stderr, stderr
	}
	fmt.Fprintf(stdout, "bench mutants: %d mutants, budget %v each, seed %d, %s, kernel %s, workdir %s\n", len(cfg.Mutants), *budget, *seed, guidance(*blind), sel.flagValue("kernel"), *workdir)
	if *seedCorpus != "" {
		fmt.Fprintf(stdout, "bench mutants: every row starts from the corpus in %s\n", *seedCorpus)
	}
	rs := mutbench.Run(ctx, cfg, stdout)
	for _, r := range rs {
		if r.Err != nil {
			fmt.Fprintf(stderr, "forkfuzz bench mutants: %s: %v\n", r.Name, r.Err)
		}
	}
	if ctx.Err() != nil {
		return exitError
	}
	errs := 0
	for _, r := range rs {
		if r.Err != nil {
			errs++
		}
	}
	if errs == len(rs) {
		return exitError
	}
	if !mutbench.Clean(rs) {
		return exitFindings
	}
	return exitClean
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
