package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/gate"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

func init() {
	commands = append(commands, command{name: "ci", args: "[flags]",
		help: "CI gate: check, boot, replay the corpus, fuzz, compare with a baseline; JUnit + JSON; exit 0 pass, 1 new findings, 2 error", run: cmdCI})
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// ciOptions are the flags of forkfuzz ci: the gate's Config (its value
// fields bound to flags, defaults from gate.DefaultConfig), the target
// selection, the outputs and how to pick the baseline.
type ciOptions struct {
	fs                             *flag.FlagSet
	sel                            *targetSel
	cfg                            gate.Config
	outs                           gate.Outputs
	junit, json, known             string
	baseline, baseMutant, baseFork string
	replayFindings, corpusDirs     listFlag
	fixes                          listFlag
	noCheck, quiet                 bool
	// diffDefault: --differential was switched on by --fork-impl.
	diffDefault bool
}

// gateFlag names the flag of each gate.Config field a flag sets.
var gateFlag = map[string]string{"Budget": "budget", "Seed": "seed", "Profile": "profile", "Workdir": "workdir",
	"MinPrograms": "min-programs", "MinFuzzPrograms": "min-fuzz-programs", "BaselineReplays": "baseline-replays", "MaxHarnessFlakes": "max-harness-flakes",
	"MinimizeRuns": "minimize-runs", "Corrupt": "corrupt", "FixRuns": "fix-runs", "CoverEvery": "cover-every"}

func cmdCI(args []string, stdout, stderr io.Writer) int {
	start := time.Now()
	o := ciFlags(stderr)
	if err := o.fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitClean
		}
		return exitError
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "forkfuzz ci: %v\n", err)
		return exitError
	}
	if err := o.assemble(start, stdout, stderr); err != nil {
		if !errors.Is(err, errPrinted) {
			fmt.Fprintf(stderr, "forkfuzz ci: %v\n", err)
		}
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "ci: seed %d (replay the gate with --seed %d and the same flags)\n", o.cfg.Seed, o.cfg.Seed)
	return o.report(gate.Run(ctx, o.cfg), stdout, stderr)
}

// errPrinted is an error already reported on stderr.
var errPrinted = errors.New("reported")

// ciFlags declares the flags of forkfuzz ci.
func ciFlags(stderr io.Writer) *ciOptions {
	o := &ciOptions{fs: newFlags("ci", stderr), cfg: gate.DefaultConfig()}
	fs, c := o.fs, &o.cfg
	o.sel = targetSetup(fs, "qemu")
	fs.DurationVar(&c.Budget, "budget", c.Budget, "hard wall-clock budget for the whole gate (check, boot, corpus replay, fuzzing, minimization, baseline, reporting)")
	fs.StringVar(&o.junit, "junit", "", "write JUnit XML here")
	fs.StringVar(&o.json, "json", "", "write the JSON summary here (docs/ci.md)")
	fs.StringVar(&o.outs.KCIDB, "kcidb", "", "write a KernelCI KCIDB submission (I/O schema v5) here")
	fs.StringVar(&o.outs.KCIDBOpts.Origin, "kcidb-origin", "forkfuzz", "KCIDB origin of the submission's ids (lowercase letters, digits, _)")
	fs.StringVar(&o.outs.KCIDBOpts.RunID, "kcidb-run-id", "", "KCIDB: this run's id part (default: a hash of the kernel, start time, seed and host; e.g. the CI job id)")
	fs.StringVar(&o.outs.KCIDBOpts.BuildID, "kcidb-build-id", "", "KCIDB: an existing build id (origin:local) the tests attach to, instead of a build of their own")
	fs.StringVar(&o.outs.KTAP, "ktap", "", "write KTAP (kselftest format) here: one line per oracle family and per finding group")
	fs.StringVar(&o.outs.BaselineTable, "baseline-table", "", "write the baseline diff as a Markdown table (run counts on both kernels) here")
	fs.StringVar(&o.known, "known-issues", "", "known-issues file: matched findings are reported, not gated (format: docs/ci.md)")
	fs.IntVar(&c.MinPrograms, "min-programs", c.MinPrograms, "fewer programs than this (corpus + fuzzed) is a harness error (exit 2)")
	fs.IntVar(&c.MinFuzzPrograms, "min-fuzz-programs", c.MinFuzzPrograms, "fewer fuzzed programs than this is exit 2: the boot and the corpus took the budget and the gate tested its corpus alone (0: a corpus-only gate may pass)")
	fs.IntVar(&c.MaxHarnessFlakes, "max-harness-flakes", c.MaxHarnessFlakes, "runs with an executor death or hang that did not reproduce (no kernel report) the gate reports but tolerates; more are exit 2")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "campaign seed (fixed default: a gate is reproducible)")
	fs.StringVar(&c.Workdir, "workdir", c.Workdir, "where findings are saved (must hold no earlier findings)")
	fs.StringVar(&o.baseline, "baseline", "", "qemu: baseline kernel image; findings it reproduces are pre-existing")
	fs.StringVar(&o.baseMutant, "baseline-mutant", "", "sim: the baseline's mutant ('none': the unmodified model); sets a baseline")
	fs.StringVar(&o.baseFork, "baseline-fork", "", "sim: the baseline's fork model (default: --fork); sets a baseline")
	fs.IntVar(&c.BaselineReplays, "baseline-replays", c.BaselineReplays, "runs of each reproducer on the baseline")
	fs.Var(&o.replayFindings, "replay-findings", "directory of earlier findings to replay with the corpus (repeatable)")
	fs.Var(&o.fixes, "fixes", "a reproducer (program file or directory) of a bug the kernel under test claims to fix, against --baseline (repeatable): it must fail on the baseline and never on the kernel under test (--fix-runs runs each); not fixed is exit 1, unconfirmed exit 2")
	fs.IntVar(&c.FixRuns, "fix-runs", c.FixRuns, "runs of each --fixes reproducer on each kernel")
	fs.Var(&o.corpusDirs, "corpus", "directory of regression programs to replay (repeatable; default: corpus/regress, corpus/rollback and corpus/cow when present)")
	fs.StringVar(&c.Profile, "profile", c.Profile, "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	fs.IntVar(&c.MinimizeRuns, "minimize-runs", c.MinimizeRuns, "target runs to spend minimizing each new finding")
	fs.BoolVar(&c.Guided, "guided", false, "let what runs reached (KCOV edges, memory states) guide the fuzz phase's mutation (blind by default: docs/coverage.md)")
	fs.IntVar(&c.CoverEvery, "cover-every", 0, fmt.Sprintf("collect kernel coverage (KCOV, 1.3-1.5x a program's time) in the fuzz phase for one program in N (default: one fresh program in %d and every corpus mutation when --guided, one in %d when blind; a finding is replayed the way its run was)", campaign.DefaultGuidedCoverEvery, campaign.DefaultBlindCoverEvery))
	fs.StringVar(&c.Corrupt, "corrupt", "", "TEST ONLY: make the executor falsify observations ("+strings.Join(executor.CorruptionNames(), ", ")+")")
	fs.BoolVar(&o.noCheck, "no-kernel-check", false, "skip `kernel check` of the images (for kernels without a findable configuration)")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	return o
}

// check rejects bad flags before anything is read or opened.
func (o *ciOptions) check() error {
	if o.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only)", o.fs.Arg(0))
	}
	if err := o.cfg.Validate(); err != nil {
		return flagError(err, gateFlag)
	}
	if c := o.cfg.Corrupt; c != "" && !contains(executor.CorruptionNames(), c) {
		return fmt.Errorf("--corrupt: unknown corruption %q (want one of %s)", c, strings.Join(executor.CorruptionNames(), ", "))
	}
	kind := o.sel.Kind()
	if _, ok := targetKinds[kind]; !ok {
		return fmt.Errorf("--target: unknown target %q", kind)
	}
	// Flags of another target kind than the chosen one are mistakes.
	if wrong := o.sel.wrongKind(); len(wrong) > 0 {
		return fmt.Errorf("flags of another target than --target %s: %s", kind, strings.Join(wrong, ", "))
	}
	if o.baseline != "" && kind != "qemu" {
		return errors.New("--baseline is a kernel image for --target qemu; for sim use --baseline-mutant/--baseline-fork")
	}
	if (o.baseMutant != "" || o.baseFork != "") && kind != "sim" {
		return errors.New("--baseline-mutant and --baseline-fork are for --target sim")
	}
	if len(o.fixes) > 0 && o.baseline == "" && o.baseMutant == "" && o.baseFork == "" {
		return errors.New("--fixes needs a baseline (--baseline IMAGE: the kernel without the fix)")
	}
	// A new fork implementation is judged against stock fork too: what
	// a child sees must not change, even where the model is silent.
	if impl := o.fs.Lookup("fork-impl"); impl != nil && impl.Value.String() != "" && impl.Value.String() != "stock" {
		explicit := false
		o.fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "differential" })
		if !explicit {
			if err := o.fs.Set("differential", "true"); err != nil {
				return err
			}
			o.diffDefault = true
		}
	}
	return nil
}

// assemble completes the gate's Config: the known issues, the corpus,
// the targets and the identities of their kernels, the replay commands.
func (o *ciOptions) assemble(start time.Time, stdout, stderr io.Writer) error {
	cfg := &o.cfg
	if o.known != "" {
		k, err := gate.ReadKnownIssues(o.known)
		if err != nil {
			return fmt.Errorf("--known-issues: %v", err)
		}
		cfg.Known = k
	}
	for _, d := range append(append([]string{}, o.replayFindings...), o.corpusDirs...) {
		if _, err := os.Stat(d); err != nil {
			return err
		}
	}
	o.outs.KCIDBOpts.Architecture = "x86_64"
	if err := o.outs.Validate(); err != nil {
		return fmt.Errorf("--kcidb: %v", err)
	}
	cfg.Open, cfg.Log, cfg.Start = o.sel.Open, stdout, start
	if f := o.fs.Lookup("vms"); f != nil && o.sel.Kind() == "qemu" && f.Value.String() != "1" {
		// A fresh-VM replay needs one VM, not the pool: the fresh phase
		// is the last to open the kernel under test.
		cfg.OpenFresh = func() (agents.Target, error) {
			if err := o.fs.Set("vms", "1"); err != nil {
				return nil, err
			}
			return o.sel.Open()
		}
	}
	cfg.CorpusDirs, cfg.ReplayFindings = o.corpusDirs, o.replayFindings
	if len(o.fixes) > 0 {
		fx, err := gate.LoadFixes(o.fixes)
		if err != nil {
			return err
		}
		cfg.Fixes = fx
	}
	if o.diffDefault {
		fmt.Fprintf(stdout, "ci: --fork-impl %s: the differential oracle is on (each program also runs with stock fork; --differential=false turns it off)\n", o.fs.Lookup("fork-impl").Value.String())
	}
	if len(o.corpusDirs) == 0 {
		cfg.OptionalCorpusDirs = []string{"corpus/regress", "corpus/rollback", "corpus/cow"}
	}
	if !o.quiet {
		cfg.Progress = stderr
		cfg.ProgressLines = !isTerminal(stderr)
	}
	kind := o.sel.Kind()
	if f := o.fs.Lookup("program-timeout"); f != nil && kind == "qemu" {
		if d, err := time.ParseDuration(f.Value.String()); err == nil {
			cfg.ProgramTimeout = d
		}
	}
	if err := o.kernelUnderTest(stderr); err != nil {
		return err
	}
	if err := o.baselineTarget(stderr); err != nil {
		return err
	}
	if kind == "sim" {
		t, err := o.sel.Open()
		if err != nil {
			return err
		}
		t.Close()
	}
	cfg.ReplayCommand = func(path string, base bool, mode gate.RunMode) string {
		flags := cfg.Kernel.Flags
		if base {
			flags = cfg.Baseline.Flags
		}
		flags = append(slices.Clip(flags), mode.Flags()...)
		return campaign.ReplayCommand(flags, cfg.Corrupt, path)
	}
	return nil
}

// kernelUnderTest identifies the kernel the gate tests (a QEMU image is
// also checked with `kernel check` unless --no-kernel-check) and how a
// replay reaches it.
func (o *ciOptions) kernelUnderTest(stderr io.Writer) error {
	cfg := &o.cfg
	switch o.sel.Kind() {
	case "qemu":
		img := o.sel.flagValue("kernel")
		if tf := o.sel.flagValue("target-file"); img == "" && tf != "" {
			t, err := vm.ReadTargetFile(tf)
			if err != nil {
				return fmt.Errorf("--target-file: %v", err)
			}
			img = t.Kernel
		}
		if img != "" {
			id, err := gate.IdentifyImage(img)
			if err != nil {
				return fmt.Errorf("--kernel: %v", err)
			}
			cfg.Kernel = id
			if !o.noCheck {
				cfg.CheckImages = append(cfg.CheckImages, img)
			}
		} else {
			cfg.Kernel.Release = ""
			fmt.Fprintln(stderr, "forkfuzz ci: warning: no --kernel: the gate runs Debian's kernel, not a kernel under test")
		}
		cfg.Kernel.Target = "qemu"
	case "native":
		cfg.Kernel = gate.HostIdentity()
	}
	cfg.Kernel.Flags = o.sel.replayFlags()
	return nil
}

// baselineTarget sets up the baseline, if any: the same target flags with
// the kernel (qemu) or the model (sim) replaced.
func (o *ciOptions) baselineTarget(stderr io.Writer) error {
	cfg, kind := &o.cfg, o.sel.Kind()
	targetArgs := o.sel.kindArgs()
	var baseArgs []string
	switch {
	case o.baseline != "":
		id, err := gate.IdentifyImage(o.baseline)
		if err != nil {
			return fmt.Errorf("--baseline: %v", err)
		}
		id.Target = "qemu"
		if !o.noCheck {
			cfg.CheckImages = append(cfg.CheckImages, o.baseline)
		}
		baseArgs = override(targetArgs, map[string]string{"kernel": o.baseline})
		if v := o.sel.flagValue("vm-workdir"); v != "" {
			baseArgs = override(baseArgs, map[string]string{"vm-workdir": v + "/baseline"})
		}
		cfg.Baseline = &id
	case o.baseMutant != "" || o.baseFork != "":
		m := o.baseMutant
		if m == "none" {
			m = ""
		} else if m == "" {
			m = o.sel.flagValue("mutant")
		}
		ov := map[string]string{"mutant": m}
		if o.baseFork != "" {
			ov["fork"] = o.baseFork
		}
		baseArgs = override(targetArgs, ov)
		cfg.Baseline = &gate.KernelIdentity{}
	default:
		return nil
	}
	bsel := targetSetup(newFlags("ci baseline", stderr), "qemu")
	if err := bsel.fs.Parse(append(append([]string{"--target", kind}, baseArgs...), forkImplReplay(o.fs)...)); err != nil {
		return errPrinted // by the flag package
	}
	cfg.OpenBaseline = bsel.Open
	cfg.Baseline.Flags = bsel.replayFlags()
	if kind == "sim" {
		// Open it once now, so a bad mutant name is exit 2 at once.
		t, err := bsel.Open()
		if err != nil {
			return fmt.Errorf("baseline: %v", err)
		}
		t.Close()
	}
	return nil
}

// report writes the gate's files, prints its summary and returns its exit
// status.
func (o *ciOptions) report(res *gate.Result, stdout, stderr io.Writer) int {
	err := res.WriteFiles(o.junit, o.json)
	if err == nil {
		err = res.WriteOutputs(o.outs)
	}
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz ci: writing results:", err)
		fmt.Fprintln(stdout, "ci: ERROR writing results:", err)
		fmt.Fprint(stdout, res.Summary())
		return exitError
	}
	fmt.Fprint(stdout, res.Summary())
	if res.ExitCode == exitError {
		// A CI log may keep stderr apart: the error goes there too.
		fmt.Fprintf(stderr, "forkfuzz ci: %s\n", res.Reason)
	}
	if res.Baseline != nil && len(res.Findings) > 0 {
		fmt.Fprint(stdout, gate.BaselineTable(res))
	}
	for _, p := range []string{o.junit, o.json, o.outs.KCIDB, o.outs.KTAP, o.outs.BaselineTable} {
		if p != "" {
			fmt.Fprintf(stdout, "ci: wrote %s\n", p)
		}
	}
	return res.ExitCode
}

// override replaces (or adds) --name value pairs in args.
func override(args []string, vals map[string]string) []string {
	out := append([]string{}, args...)
	var names []string
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		found := false
		for i := 0; i+1 < len(out); i += 2 {
			if out[i] == "--"+n {
				out[i+1], found = vals[n], true
			}
		}
		if !found {
			out = append(out, "--"+n, vals[n])
		}
	}
	var kept []string
	for i := 0; i+1 < len(out); i += 2 {
		if out[i+1] != "" {
			kept = append(kept, out[i], out[i+1])
		}
	}
	return kept
}
