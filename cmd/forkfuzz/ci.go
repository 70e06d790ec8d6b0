package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

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

func cmdCI(args []string, stdout, stderr io.Writer) int {
	start := time.Now()
	fs := newFlags("ci", stderr)
	sel := targetSetup(fs, "qemu")
	budget := fs.Duration("budget", 30*time.Minute, "hard wall-clock budget for the whole gate (check, boot, corpus replay, fuzzing, minimization, baseline, reporting)")
	junitPath := fs.String("junit", "", "write JUnit XML here")
	jsonPath := fs.String("json", "", "write the JSON summary here (docs/ci.md)")
	kcidbPath := fs.String("kcidb", "", "write a KernelCI KCIDB submission (I/O schema v5) here")
	kcidbOrigin := fs.String("kcidb-origin", "forkfuzz", "KCIDB origin of the submission's ids (lowercase letters, digits, _)")
	kcidbRun := fs.String("kcidb-run-id", "", "KCIDB: this run's id part (default: a hash of the kernel, start time, seed and host; e.g. the CI job id)")
	kcidbBuild := fs.String("kcidb-build-id", "", "KCIDB: an existing build id (origin:local) the tests attach to, instead of a build of their own")
	ktapPath := fs.String("ktap", "", "write KTAP (kselftest format) here: one line per oracle family and per finding group")
	tablePath := fs.String("baseline-table", "", "write the baseline diff as a Markdown table (run counts on both kernels) here")
	knownPath := fs.String("known-issues", "", "known-issues file: matched findings are reported, not gated (format: docs/ci.md)")
	minProgs := fs.Int("min-programs", 1, "fewer programs than this (corpus + fuzzed) is a harness error (exit 2)")
	maxFlakes := fs.Int("max-harness-flakes", 1, "runs with an executor death or hang that did not reproduce (no kernel report) the gate reports but tolerates; more are exit 2")
	seed := fs.Uint64("seed", 1, "campaign seed (fixed default: a gate is reproducible)")
	workdir := fs.String("workdir", "forkfuzz-ci", "where findings are saved (must hold no earlier findings)")
	baseline := fs.String("baseline", "", "qemu: baseline kernel image; findings it reproduces are pre-existing")
	baseMutant := fs.String("baseline-mutant", "", "sim: the baseline's mutant ('none': the unmodified model); sets a baseline")
	baseFork := fs.String("baseline-fork", "", "sim: the baseline's fork model (default: --fork); sets a baseline")
	baseReplays := fs.Int("baseline-replays", 3, "runs of each reproducer on the baseline")
	var replayFindings, corpusDirs listFlag
	fs.Var(&replayFindings, "replay-findings", "directory of earlier findings to replay with the corpus (repeatable)")
	fs.Var(&corpusDirs, "corpus", "directory of regression programs to replay (repeatable; default: corpus/regress and corpus/rollback when present)")
	profile := fs.String("profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	minRuns := fs.Int("minimize-runs", 300, "target runs to spend minimizing each new finding")
	corrupt := fs.String("corrupt", "", "TEST ONLY: make the executor falsify observations ("+strings.Join(executor.CorruptionNames(), ", ")+")")
	noCheck := fs.Bool("no-kernel-check", false, "skip `kernel check` of the images (for kernels without a findable configuration)")
	quiet := fs.Bool("q", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitClean
		}
		return exitError
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "forkfuzz ci: "+format+"\n", a...)
		return exitError
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if *budget <= 0 {
		return fail("--budget must be positive, got %v", *budget)
	}
	if *budget < 5*time.Second {
		return fail("--budget %v is too short for a gate (at least 5s)", *budget)
	}
	if *minProgs < 0 {
		return fail("--min-programs must be >= 0, got %d", *minProgs)
	}
	if *maxFlakes < 0 {
		return fail("--max-harness-flakes must be >= 0, got %d", *maxFlakes)
	}
	if *baseReplays < 1 {
		return fail("--baseline-replays must be >= 1, got %d", *baseReplays)
	}
	if *minRuns < 1 {
		return fail("--minimize-runs must be >= 1, got %d", *minRuns)
	}
	if _, err := gen.Profile(*profile); err != nil {
		return fail("--profile: %v", err)
	}
	if *corrupt != "" && !contains(executor.CorruptionNames(), *corrupt) {
		return fail("--corrupt: unknown corruption %q (want one of %s)", *corrupt, strings.Join(executor.CorruptionNames(), ", "))
	}
	kind := sel.Kind()
	if _, ok := targetKinds[kind]; !ok {
		return fail("--target: unknown target %q", kind)
	}
	// Flags of another target kind than the chosen one are mistakes.
	if wrong := sel.wrongKind(); len(wrong) > 0 {
		return fail("flags of another target than --target %s: %s", kind, strings.Join(wrong, ", "))
	}
	if *baseline != "" && kind != "qemu" {
		return fail("--baseline is a kernel image for --target qemu; for sim use --baseline-mutant/--baseline-fork")
	}
	if (*baseMutant != "" || *baseFork != "") && kind != "sim" {
		return fail("--baseline-mutant and --baseline-fork are for --target sim")
	}
	var known *gate.KnownIssues
	if *knownPath != "" {
		k, err := gate.ReadKnownIssues(*knownPath)
		if err != nil {
			return fail("--known-issues: %v", err)
		}
		known = k
	}
	for _, d := range append(append([]string{}, replayFindings...), corpusDirs...) {
		if _, err := os.Stat(d); err != nil {
			return fail("%v", err)
		}
	}

	outs := gate.Outputs{KCIDB: *kcidbPath, KTAP: *ktapPath, BaselineTable: *tablePath,
		KCIDBOpts: gate.KCIDBOptions{Origin: *kcidbOrigin, RunID: *kcidbRun, BuildID: *kcidbBuild, Architecture: "x86_64"}}
	if err := outs.Validate(); err != nil {
		return fail("--kcidb: %v", err)
	}
	targetArgs := sel.kindArgs()
	cfg := gate.Config{
		Open: sel.Open, Budget: *budget, Seed: *seed, Profile: *profile, Workdir: *workdir,
		CorpusDirs: corpusDirs, ReplayFindings: replayFindings, Known: known, MinPrograms: *minProgs,
		BaselineReplays: *baseReplays, MinimizeRuns: *minRuns, MaxHarnessFlakes: *maxFlakes, Corrupt: *corrupt, Log: stdout, Start: start,
	}
	if len(corpusDirs) == 0 {
		cfg.OptionalCorpusDirs = []string{"corpus/regress", "corpus/rollback"}
	}
	if !*quiet {
		cfg.Progress = stderr
		cfg.ProgressLines = !isTerminal(stderr)
	}
	if f := fs.Lookup("program-timeout"); f != nil && kind == "qemu" {
		if d, err := time.ParseDuration(f.Value.String()); err == nil {
			cfg.ProgramTimeout = d
		}
	}
	// The kernel under test.
	switch kind {
	case "qemu":
		img := fs.Lookup("kernel").Value.String()
		if img == "" {
			if tf := fs.Lookup("target-file").Value.String(); tf != "" {
				t, err := vm.ReadTargetFile(tf)
				if err != nil {
					return fail("--target-file: %v", err)
				}
				img = t.Kernel
			}
		}
		if img != "" {
			id, err := gate.IdentifyImage(img)
			if err != nil {
				return fail("--kernel: %v", err)
			}
			cfg.Kernel = id
			if !*noCheck {
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
	cfg.Kernel.Flags = sel.replayFlags()
	// The baseline: the same target flags with the kernel (qemu) or the
	// model (sim) replaced.
	var baseArgs []string
	switch {
	case *baseline != "":
		id, err := gate.IdentifyImage(*baseline)
		if err != nil {
			return fail("--baseline: %v", err)
		}
		id.Target = "qemu"
		if !*noCheck {
			cfg.CheckImages = append(cfg.CheckImages, *baseline)
		}
		baseArgs = override(targetArgs, map[string]string{"kernel": *baseline})
		if v := fs.Lookup("vm-workdir").Value.String(); v != "" {
			baseArgs = override(baseArgs, map[string]string{"vm-workdir": v + "/baseline"})
		}
		cfg.Baseline = &id
	case *baseMutant != "" || *baseFork != "":
		m := *baseMutant
		if m == "none" {
			m = ""
		} else if m == "" {
			m = fs.Lookup("mutant").Value.String()
		}
		ov := map[string]string{"mutant": m}
		if *baseFork != "" {
			ov["fork"] = *baseFork
		}
		baseArgs = override(targetArgs, ov)
		cfg.Baseline = &gate.KernelIdentity{}
	}
	if cfg.Baseline != nil {
		bsel := targetSetup(newFlags("ci baseline", stderr), "qemu")
		if err := bsel.fs.Parse(append(append([]string{"--target", kind}, baseArgs...), forkImplReplay(fs)...)); err != nil {
			return exitError
		}
		openBase := bsel.Open
		cfg.OpenBaseline = openBase
		cfg.Baseline.Flags = bsel.replayFlags()
		if kind == "sim" {
			// Open it once now, so a bad mutant name is exit 2 at once.
			t, err := openBase()
			if err != nil {
				return fail("baseline: %v", err)
			}
			t.Close()
		}
	}
	if kind == "sim" {
		t, err := sel.Open()
		if err != nil {
			return fail("%v", err)
		}
		t.Close()
	}
	cfg.ReplayCommand = func(path string, base bool) string {
		if base {
			return campaign.ReplayCommand(cfg.Baseline.Flags, *corrupt, path)
		}
		return campaign.ReplayCommand(cfg.Kernel.Flags, *corrupt, path)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "ci: seed %d (replay the gate with --seed %d and the same flags)\n", *seed, *seed)
	res := gate.Run(ctx, cfg)
	err := res.WriteFiles(*junitPath, *jsonPath)
	if err == nil {
		err = res.WriteOutputs(outs)
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
	for _, p := range []string{*junitPath, *jsonPath, *kcidbPath, *ktapPath, *tablePath} {
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
