package main

import (
	"encoding/json"
	"flag"
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
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func init() {
	commands = append(commands, command{name: "modelcmp", args: "[flags]",
		help: "run generated programs on a target and on the simulated kernel; report the differences by class", run: cmdModelcmp})
}

// modelcmpOptions are the flags of forkfuzz modelcmp.
type modelcmpOptions struct {
	fs                  *flag.FlagSet
	sel                 *targetSel
	model, profile      string
	modelKernel         *releaseFlag
	modelSeed, seed     uint64
	n, maxErr           int
	out, record, replay string
	verbose             bool
	duration            time.Duration
	mode                sim.Mode
	weights             gen.Weights
}

// cmdModelcmp checks the simulated kernel against a real one: the same
// generated programs (without what the model does not simulate) on the
// target and on the model, differences sorted into classes, each
// explained (hostcmp.KnownClasses) or not. Exit 0: no unexplained
// difference; 1: some; 2: errors.
func cmdModelcmp(args []string, stdout, stderr io.Writer) int {
	o := modelcmpFlags(stderr)
	if err := parseArgs(o.fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "forkfuzz modelcmp:", err)
		return exitError
	}
	if err := o.check(); err != nil {
		return fail(err)
	}
	if o.replay != "" {
		return modelcmpReplay(o.replay, o.mode, o.modelSeed, string(*o.modelKernel), o.verbose, stdout, stderr)
	}
	if o.record != "" {
		if err := os.MkdirAll(o.record, 0o755); err != nil {
			return fail(err)
		}
	}
	t, err := o.sel.Open()
	if err != nil {
		return fail(err)
	}
	defer t.Close()
	fmt.Fprintf(stderr, "modelcmp: %s against the simulated %s fork, seed %d, profile %s, model seed %d, %d programs\n",
		t.Name(), o.mode, o.seed, o.profile, o.modelSeed, o.n)
	rec := &recordingTarget{Target: t}
	c := &hostcmp.ModelCmp{Target: rec, Mode: o.mode, SchedSeed: o.modelSeed, Kernel: string(*o.modelKernel)}
	if code, ok := o.compare(c, rec, stdout, stderr); !ok {
		return code
	}
	c.Report(stdout)
	if u := c.Unexplained(); len(u) > 0 {
		return exitFindings
	}
	return exitClean
}

// modelcmpFlags declares the flags of forkfuzz modelcmp.
func modelcmpFlags(stderr io.Writer) *modelcmpOptions {
	o := &modelcmpOptions{fs: newFlags("modelcmp", stderr)}
	fs := o.fs
	o.sel = targetSetup(fs, "native")
	fs.StringVar(&o.model, "model", "async", "simulated fork the target is compared with: eager, ondemand or async")
	o.modelKernel = releaseVar(fs, "model-kernel", "release (uname -r's form) the model follows where Linux changed behaviour (default: the target's uname -r; e.g. 6.18 to see what the version rules account for)")
	fs.Uint64Var(&o.modelSeed, "model-seed", 0, "scheduler seed of the simulated kernel (interleaving of Async-fork's copy)")
	fs.IntVar(&o.n, "programs", 100, "programs to compare")
	fs.Uint64Var(&o.seed, "seed", 0, "generator seed (0: random, printed)")
	fs.StringVar(&o.profile, "profile", "default", "generator weights (without threads, fault injection and the pinned operations the model lacks)")
	fs.StringVar(&o.out, "out", "", "write every differing program, the differences and both observations' maps to this directory")
	fs.BoolVar(&o.verbose, "v", false, "print every differing program and its differences")
	fs.StringVar(&o.record, "record", "", "save every compared program and the target's observation (N.ffz, N.json) in this directory, for --replay")
	fs.StringVar(&o.replay, "replay", "", "compare the programs and observations saved by --record in this directory with the model again (no target runs)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long even if fewer programs were compared (0: no limit)")
	fs.IntVar(&o.maxErr, "max-harness-errors", 5, "give up (exit 2) after this many target errors in a row")
	positive(fs, "programs", "max-harness-errors")
	return o
}

// check parses --model and --profile, draws a seed when none was given
// and makes the --out directory.
func (o *modelcmpOptions) check() error {
	var err error
	if o.mode, err = sim.ParseMode(o.model); err != nil {
		return fmt.Errorf("--model: %v", err)
	}
	if o.weights, err = hostcmp.Weights(o.profile); err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()>>1 | 1
	}
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// compare runs generated programs on the target and the model until
// --programs were compared or --duration is over; ok false says the
// comparison gave up, with exit status code.
func (o *modelcmpOptions) compare(c *hostcmp.ModelCmp, rec *recordingTarget, stdout, stderr io.Writer) (code int, ok bool) {
	inRow, r0 := 0, 0
	start := time.Now()
	for i := 0; c.Programs < o.n; i++ {
		if o.duration > 0 && time.Since(start) > o.duration {
			fmt.Fprintf(stderr, "modelcmp: --duration %v reached after %d programs\n", o.duration, c.Programs)
			break
		}
		if c.Programs > 0 && c.Programs%10 == 0 && r0 != c.Programs {
			r0 = c.Programs
			fmt.Fprintf(stderr, "modelcmp: %d compared in %v: %d agree, %d differ, %d target errors\n", c.Programs, time.Since(start).Round(time.Second), c.Agree, c.Differ, c.HarnessErrors+c.Events)
		}
		p := hostcmp.Generate(o.seed, i, o.weights)
		rec.last = nil
		r := c.One(p)
		if o.record != "" && rec.last != nil {
			b, _ := json.Marshal(rec.last)
			os.WriteFile(filepath.Join(o.record, fmt.Sprintf("%d.ffz", i)), p.Format(), 0o644)
			os.WriteFile(filepath.Join(o.record, fmt.Sprintf("%d.json", i)), b, 0o644)
		}
		switch {
		case r.Skip != "":
			continue
		case r.Err != nil:
			fmt.Fprintf(stderr, "program %d: %v\n", i, r.Err)
			if strings.HasPrefix(r.Err.Error(), "simulated ") {
				return exitError, false
			}
			if inRow++; inRow >= o.maxErr {
				fmt.Fprintf(stderr, "forkfuzz modelcmp: %d target errors in a row, giving up\n", inRow)
				c.Report(stdout)
				return exitError, false
			}
			continue
		}
		inRow = 0
		if len(r.Diffs) > 0 {
			o.printDiffs(i, p, r, stdout)
		}
	}
	return exitClean, true
}

// printDiffs prints (-v) and saves (--out) program i and its differences.
func (o *modelcmpOptions) printDiffs(i int, p *prog.Program, r hostcmp.Result, stdout io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "# seed %d, program %d: %d differences (kernel/model %s), eager model: %d\n", o.seed, i, len(r.Diffs), o.mode, len(r.Eager))
	for _, d := range r.Diffs {
		fmt.Fprintf(&b, "# [%s] %s\n", d.Class, strings.ReplaceAll(d.Text, "\n", "\n#   "))
	}
	b.Write(p.Format())
	if o.verbose {
		fmt.Fprintln(stdout, b.String())
	}
	if o.out != "" {
		os.WriteFile(filepath.Join(o.out, fmt.Sprintf("diff-%d.ffz", i)), []byte(b.String()), 0o644)
	}
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
