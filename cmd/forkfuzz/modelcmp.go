package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/agents/sim/hostcmp"
)

func init() {
	commands = append(commands, command{name: "modelcmp", args: "[flags]",
		help: "run generated programs on a target and on the simulated kernel; report the differences by class", run: cmdModelcmp})
}

// cmdModelcmp checks the simulated kernel against a real one: the same
// generated programs (without what the model does not simulate) on the
// target and on the model, differences sorted into classes, each
// explained (hostcmp.KnownClasses) or not. Exit 0: no unexplained
// difference; 1: some; 2: errors.
func cmdModelcmp(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("modelcmp", stderr)
	sel := targetSetup(fs, "native")
	model := fs.String("model", "async", "simulated fork the target is compared with: eager, ondemand or async")
	modelSeed := fs.Uint64("model-seed", 0, "scheduler seed of the simulated kernel (interleaving of Async-fork's copy)")
	n := fs.Int("programs", 100, "programs to compare")
	seed := fs.Uint64("seed", 0, "generator seed (0: random, printed)")
	profile := fs.String("profile", "default", "generator weights (without threads, fault injection and the pinned operations the model lacks)")
	out := fs.String("out", "", "write every differing program, the differences and both observations' maps to this directory")
	verbose := fs.Bool("v", false, "print every differing program and its differences")
	duration := fs.Duration("duration", 0, "stop after this long even if fewer programs were compared (0: no limit)")
	maxErr := fs.Int("max-harness-errors", 5, "give up (exit 2) after this many target errors in a row")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if !noArgs(fs, stderr) {
		return exitError
	}
	mode, err := sim.ParseMode(*model)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz modelcmp: --model:", err)
		return exitError
	}
	w, err := hostcmp.Weights(*profile)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz modelcmp: --profile:", err)
		return exitError
	}
	if *n <= 0 {
		fmt.Fprintln(stderr, "forkfuzz modelcmp: --programs must be positive")
		return exitError
	}
	if *seed == 0 {
		*seed = rand.Uint64()>>1 | 1
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(stderr, "forkfuzz modelcmp:", err)
			return exitError
		}
	}
	t, err := sel.Open()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz modelcmp:", err)
		return exitError
	}
	defer t.Close()
	fmt.Fprintf(stderr, "modelcmp: %s against the simulated %s fork, seed %d, profile %s, model seed %d, %d programs\n",
		t.Name(), mode, *seed, *profile, *modelSeed, *n)
	c := &hostcmp.ModelCmp{Target: t, Mode: mode, SchedSeed: *modelSeed}
	inRow, r0 := 0, 0
	start := time.Now()
	for i := 0; c.Programs < *n; i++ {
		if *duration > 0 && time.Since(start) > *duration {
			fmt.Fprintf(stderr, "modelcmp: --duration %v reached after %d programs\n", *duration, c.Programs)
			break
		}
		if c.Programs > 0 && c.Programs%10 == 0 && r0 != c.Programs {
			r0 = c.Programs
			fmt.Fprintf(stderr, "modelcmp: %d compared in %v: %d agree, %d differ, %d target errors\n", c.Programs, time.Since(start).Round(time.Second), c.Agree, c.Differ, c.HarnessErrors+c.Events)
		}
		p := hostcmp.Generate(*seed, i, w)
		r := c.One(p)
		switch {
		case r.Skip != "":
			continue
		case r.Err != nil:
			fmt.Fprintf(stderr, "program %d: %v\n", i, r.Err)
			if strings.HasPrefix(r.Err.Error(), "simulated ") {
				return exitError
			}
			if inRow++; inRow >= *maxErr {
				fmt.Fprintf(stderr, "forkfuzz modelcmp: %d target errors in a row, giving up\n", inRow)
				c.Report(stdout)
				return exitError
			}
			continue
		}
		inRow = 0
		if len(r.Diffs) == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# seed %d, program %d: %d differences (kernel/model %s), eager model: %d\n", *seed, i, len(r.Diffs), mode, len(r.Eager))
		for _, d := range r.Diffs {
			fmt.Fprintf(&b, "# [%s] %s\n", d.Class, strings.ReplaceAll(d.Text, "\n", "\n#   "))
		}
		b.Write(p.Format())
		if *verbose {
			fmt.Fprintln(stdout, b.String())
		}
		if *out != "" {
			os.WriteFile(filepath.Join(*out, fmt.Sprintf("diff-%d.ffz", i)), []byte(b.String()), 0o644)
		}
	}
	c.Report(stdout)
	if u := c.Unexplained(); len(u) > 0 {
		return exitFindings
	}
	return exitClean
}
