package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/bench/simbench"
)

func init() {
	targetKinds["sim"] = targetKind{help: "the simulated kernel (eager, On-demand-fork or Async-fork model, optional mutant)", flags: simFlags,
		replay: []string{"fork", "mutant", "sched-seed", "fail-nth", "fail-rate"}}
	commands = append(commands, command{name: "sim-bench", args: "[flags]",
		help: "hunt every mutant of the simulated kernel: detection, time, programs, minimized size", run: cmdSimBench})
}

// simFlag names the flag of each sim.Config field a flag sets.
var simFlag = map[string]string{"Mode": "fork", "Mutant": "mutant", "SchedSeed": "sched-seed", "FailNth": "fail-nth", "FailRate": "fail-rate"}

func simFlags(fs *flag.FlagSet) func() (agents.Target, error) {
	fork := fs.String("fork", sim.DefaultConfig().Mode.String(), "sim: fork implementation: eager, ondemand or async")
	mutant := fs.String("mutant", "", "sim: switch on a catalogued bug (see --list-mutants)")
	list := fs.Bool("list-mutants", false, "sim: print the mutants of --fork (name, then a description) and exit")
	seed := fs.Uint64("sched-seed", 0, "sim: scheduler seed (interleaving of Async-fork's background copy, failure positions)")
	failNth := fs.Int("fail-nth", 0, "sim: make the n-th allocation of every fork fail (0: never)")
	failRate := fs.Float64("fail-rate", 0, "sim: probability that a fork gets a failing allocation")
	return func() (agents.Target, error) {
		mode, err := sim.ParseMode(*fork)
		if err != nil {
			return nil, err
		}
		cfg := sim.Config{Mode: mode, Mutant: *mutant, SchedSeed: *seed, FailNth: *failNth, FailRate: *failRate}
		if *list {
			// Listing needs no mutant: --fork is what it lists.
			cfg.Mutant = ""
		}
		if err := cfg.Validate(); err != nil {
			return nil, flagError(err, simFlag)
		}
		if *list {
			listMutants(os.Stdout, mode)
			os.Exit(exitClean)
		}
		return sim.NewTarget(cfg)
	}
}

func listMutants(w io.Writer, mode sim.Mode) {
	for _, m := range sim.MutantsFor(mode) {
		fmt.Fprintf(w, "%s\t%s\n", m.Name, m.Desc)
	}
}

func cmdSimBench(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sim-bench", stderr)
	fork := fs.String("fork", "all", "fork implementation whose mutants to hunt: eager, ondemand, async or all")
	budget := fs.Duration("budget", 20*time.Second, "time bound per mutant")
	programs := fs.Int("programs", 0, "program bound per mutant (0: none)")
	seed := fs.Uint64("seed", 1, "campaign seed")
	minRuns := fs.Int("minimize-runs", 2000, "runs spent minimizing each reproducer")
	show := fs.Bool("v", false, "print each minimized reproducer and its finding")
	positive(fs, "budget")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	mode := -1
	if *fork != "all" {
		m, err := sim.ParseMode(*fork)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz sim-bench:", err)
			return exitError
		}
		mode = int(m)
	}
	rs := simbench.HuntAll(stdout, mode, simbench.HuntConfig{Seed: *seed, Budget: *budget, Programs: *programs, MinimizeRuns: *minRuns})
	missed := 0
	for _, r := range rs {
		if !r.Detected {
			missed++
			continue
		}
		if *show {
			fmt.Fprintf(stdout, "\n== %s (%s)\n%s%s\n", r.Mutant.Name, r.Signature, r.Minimized.Format(), r.MinText)
		}
	}
	if missed > 0 {
		return exitFindings
	}
	return exitClean
}
