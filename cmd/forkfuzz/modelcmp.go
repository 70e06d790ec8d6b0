package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/agents/sim/hostcmp"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
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
	modelKernel := releaseVar(fs, "model-kernel", "release (uname -r's form) the model follows where Linux changed behaviour (default: the target's uname -r; e.g. 6.18 to see what the version rules account for)")
	modelSeed := fs.Uint64("model-seed", 0, "scheduler seed of the simulated kernel (interleaving of Async-fork's copy)")
	n := fs.Int("programs", 100, "programs to compare")
	seed := fs.Uint64("seed", 0, "generator seed (0: random, printed)")
	profile := fs.String("profile", "default", "generator weights (without threads, fault injection and the pinned operations the model lacks)")
	out := fs.String("out", "", "write every differing program, the differences and both observations' maps to this directory")
	verbose := fs.Bool("v", false, "print every differing program and its differences")
	record := fs.String("record", "", "save every compared program and the target's observation (N.ffz, N.json) in this directory, for --replay")
	replay := fs.String("replay", "", "compare the programs and observations saved by --record in this directory with the model again (no target runs)")
	duration := fs.Duration("duration", 0, "stop after this long even if fewer programs were compared (0: no limit)")
	maxErr := fs.Int("max-harness-errors", 5, "give up (exit 2) after this many target errors in a row")
	positive(fs, "programs", "max-harness-errors")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
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
	if *seed == 0 {
		*seed = rand.Uint64()>>1 | 1
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(stderr, "forkfuzz modelcmp:", err)
			return exitError
		}
	}
	if *replay != "" {
		return modelcmpReplay(*replay, mode, *modelSeed, string(*modelKernel), *verbose, stdout, stderr)
	}
	if *record != "" {
		if err := os.MkdirAll(*record, 0o755); err != nil {
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
	rec := &recordingTarget{Target: t}
	c := &hostcmp.ModelCmp{Target: rec, Mode: mode, SchedSeed: *modelSeed, Kernel: string(*modelKernel)}
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
		rec.last = nil
		r := c.One(p)
		if *record != "" && rec.last != nil {
			b, _ := json.Marshal(rec.last)
			os.WriteFile(filepath.Join(*record, fmt.Sprintf("%d.ffz", i)), p.Format(), 0o644)
			os.WriteFile(filepath.Join(*record, fmt.Sprintf("%d.json", i)), b, 0o644)
		}
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

// recordingTarget keeps the last observation of the target it wraps.
type recordingTarget struct {
	agents.Target
	last *obs.Observation
}

func (r *recordingTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	o, err := r.Target.Run(p, opt)
	if err == nil {
		r.last = o
	}
	return o, err
}

// recorded is a target that returns one saved observation.
type recorded struct{ o *obs.Observation }

func (r recorded) Name() string { return "recorded" }
func (r recorded) Close() error { return nil }
func (r recorded) Run(*prog.Program, agents.Options) (*obs.Observation, error) {
	o := *r.o
	return &o, nil
}

// modelcmpReplay compares the programs and observations --record saved in
// dir with the model.
func modelcmpReplay(dir string, mode sim.Mode, seed uint64, kernel string, verbose bool, stdout, stderr io.Writer) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.ffz"))
	if len(files) == 0 {
		fmt.Fprintf(stderr, "forkfuzz modelcmp: --replay %s: no saved programs (N.ffz and N.json)\n", dir)
		return exitError
	}
	num := func(f string) int { n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".ffz")); return n }
	sort.Slice(files, func(i, j int) bool { return num(files[i]) < num(files[j]) })
	c := &hostcmp.ModelCmp{Mode: mode, SchedSeed: seed, Kernel: kernel}
	for _, f := range files {
		p, err := readProgram(f)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz modelcmp:", err)
			return exitError
		}
		jf := strings.TrimSuffix(f, ".ffz") + ".json"
		b, err := readLimited(jf, maxObservationFile, "observation")
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz modelcmp:", err)
			return exitError
		}
		var o obs.Observation
		if err := json.Unmarshal(b, &o); err != nil {
			fmt.Fprintf(stderr, "forkfuzz modelcmp: %s: %v\n", jf, err)
			return exitError
		}
		c.Target = recorded{&o}
		r := c.One(p)
		if r.Err != nil {
			fmt.Fprintf(stderr, "forkfuzz modelcmp: %s: %v\n", f, r.Err)
			return exitError
		}
		if verbose && len(r.Diffs) > 0 {
			fmt.Fprintf(stdout, "# %s: %d differences\n", f, len(r.Diffs))
			for _, d := range r.Diffs {
				fmt.Fprintf(stdout, "# [%s] %s\n", d.Class, strings.ReplaceAll(d.Text, "\n", "\n#   "))
			}
		}
	}
	c.Report(stdout)
	if len(c.Unexplained()) > 0 {
		return exitFindings
	}
	return exitClean
}
