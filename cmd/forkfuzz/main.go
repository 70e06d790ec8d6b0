// Command forkfuzz fuzzes and consistency-checks implementations of fork().
//
// Exit status: 0 clean, 1 findings, 2 errors.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/report"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/version"
)

const (
	exitClean    = 0
	exitFindings = 1
	exitError    = 2
)

type command struct {
	name, args, help string
	run              func(args []string, stdout, stderr io.Writer) int
	// hidden: usage does not list it. A hidden command without args is
	// internal (started by forkfuzz itself or the kernel): its -h says
	// so instead of running it.
	hidden bool
}

// commands lists the commands; other files of this package append theirs
// in init functions. (Filled in init, not by an initializer: the commands
// look themselves up in it for their usage, an initialization cycle.)
var commands []command

func init() {
	commands = append([]command{
		{name: "run", args: "[flags]", help: "run a fuzzing campaign", run: cmdRun},
		{name: "gen", args: "[flags]", help: "print generated programs", run: cmdGen},
		{name: "exec", args: "[flags] PROG", help: "run one program and print the verdict", run: cmdExec},
		{name: "check", args: "[flags] PROG OBS", help: "re-judge a recorded observation (JSON) of a program", run: cmdCheck},
		{name: "minimize", args: "[flags] PROG", help: "shrink a failing program while its finding reproduces", run: cmdMinimize},
		{name: "executor", help: "serve as an executor process (started by forkfuzz itself)", run: cmdExecutor, hidden: true},
	}, commands...)
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitError
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitClean
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return exitClean
		}
		args = append(append([]string(nil), args[1:]...), "-h") // help CMD [SUB]: CMD [SUB] -h
	case "-version", "--version":
		fmt.Fprintln(stdout, version.String())
		return exitClean
	}
	c, ok := findCommand(args[0])
	if !ok {
		unknownName(stderr, "forkfuzz", "command", args[0], visibleNames(commands), "'forkfuzz help' lists the commands")
		return exitError
	}
	if wantsHelp(args[1:]) {
		return showHelp(c, args[1:], stdout)
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: forkfuzz COMMAND [flags]\n\ncommands:")
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.name, c.args, c.help)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nexit status: 0 clean, 1 findings, 2 errors. 'forkfuzz COMMAND -h' for flags, 'forkfuzz --version' for the version.")
}

// targetKind is one kind of --target: the flags it takes and how to open it.
type targetKind struct {
	help string
	// flags registers the kind's own flags on a command's flag set and
	// returns the function that opens the target once flags are parsed.
	flags func(fs *flag.FlagSet) func() (agents.Target, error)
	// replay names the kind's flags a replay of a finding must repeat
	// (those that change what a program does); paths names those that
	// are file paths (made absolute in the replay command).
	replay, paths []string
}

// targetKinds maps --target names to kinds; other files of this package
// add theirs in init functions.
var targetKinds = map[string]targetKind{
	"native": {
		help: "the host kernel",
		flags: func(*flag.FlagSet) func() (agents.Target, error) {
			return func() (agents.Target, error) { return agents.NewNative(nil), nil }
		},
	},
}

// targetFlags adds --target and every kind's flags to fs; call the result
// after parsing to open the chosen target (flags of another kind than the
// chosen one are an error). targetSetup gives the replay flags too.
func targetFlags(fs *flag.FlagSet, def string) func() (agents.Target, error) {
	return targetSetup(fs, def).Open
}

// Size limits of input files, checked while reading: a program of MaxOps
// operations is well under 1 MiB of text.
const (
	maxProgramFile     = 16 << 20
	maxObservationFile = 256 << 20
)

// readLimited reads path, failing once it exceeds limit bytes.
func readLimited(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %s larger than %d MiB, the limit", path, what, limit>>20)
	}
	return b, nil
}

// readProgram reads the program arg names: a program file, or FILE#N,
// the N-th program of a file that holds several (corpus.Separator lines).
func readProgram(arg string) (*prog.Program, error) {
	fp, _, err := readFileProgram(arg)
	return fp.Prog, err
}

// programSites returns the site directives (corpus.ParseSites) of the
// program arg names (readProgram).
func programSites(arg string) (campaign.Sites, error) {
	fp, serr, err := readFileProgram(arg)
	if err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return campaign.DirectiveSites(fp.Sites), nil
}

// readFileProgram reads the program arg names and its site directives;
// serr is what is wrong with those.
func readFileProgram(arg string) (fp corpus.FileProgram, serr, err error) {
	path, n := corpus.SplitName(arg)
	if _, err := os.Stat(arg); err == nil {
		path, n = arg, 0 // a file whose name holds '#'
	}
	b, err := readLimited(path, maxProgramFile, "program")
	if err != nil {
		return fp, nil, err
	}
	if n == 0 && !bytes.Contains(b, []byte("\n"+corpus.Separator)) && !bytes.HasPrefix(b, []byte(corpus.Separator)) {
		p, err := prog.Parse(b)
		if err != nil {
			return fp, nil, fmt.Errorf("%s:%w", path, withColon(err))
		}
		sites, serr := corpus.ParseSites(path, b, p)
		return corpus.FileProgram{N: 1, Text: b, Prog: p, Sites: sites}, serr, nil
	}
	ps, err := corpus.FilePrograms(path, b)
	if err != nil {
		return fp, nil, err
	}
	fp, err = corpus.Pick(path, ps, n)
	return fp, nil, err
}

// withColon makes "path:" + err read as "path:LINE:COL: msg" or "path: msg".
func withColon(err error) error {
	var se *prog.SyntaxError
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf(" %w", err)
}

// runOptions are the flags of forkfuzz run: the campaign's Config (its
// value fields bound to flags), the target selection and the rest.
type runOptions struct {
	fs          *flag.FlagSet
	sel         *targetSel
	cfg         campaign.Config
	profile     string
	quiet, dist bool
	cover       *coverOpts
	resume      func(context.Context, *campaign.Config, agents.Target) error
}

// campaignFlag names the flag of each campaign.Config field a flag sets.
var campaignFlag = map[string]string{"Duration": "duration", "Programs": "programs", "Seed": "seed", "Workdir": "workdir",
	"MinimizeRuns": "minimize-runs", "MinimizeTime": "minimize-time", "Corrupt": "corrupt", "MaxHarnessErrors": "max-harness-errors",
	"NoStates": "no-states", "CoverEvery": "cover-every"}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	o := runFlagSet(stderr)
	if err := parseArgs(o.fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "forkfuzz run: "+format+"\n", args...)
		return exitError
	}
	if err := o.check(); err != nil {
		return fail("%v", err)
	}
	t, err := o.sel.Open()
	if err != nil {
		return fail("%v", err)
	}
	defer t.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := o.config(t, stdout, stderr)
	if o.dist {
		stop()
		return runDist(t, o.sel.Kind(), cfg, cfg.MinimizeRuns, cfg.MinimizeTime, stdout, stderr)
	}
	fmt.Fprintf(stdout, "campaign: %s, kernel %s\n", version.String(), cfg.Kernel)
	if err := o.resume(ctx, &cfg, t); err != nil {
		fmt.Fprintln(stderr, "forkfuzz run:", err)
		return exitError
	}
	st, err := campaign.Run(ctx, cfg)
	if st != nil {
		printRunSummary(stdout, st, cfg.Seed, ctx.Err() != nil)
	}
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz run:", err)
		if st != nil && st.Events > 0 {
			fmt.Fprintf(stderr, "forkfuzz run: and before that, %d failing runs: %d new findings, %d known from earlier runs (listed on stdout)\n", st.Events, st.Findings, st.Known)
		}
		return exitError
	}
	return runExit(st, fail)
}

// runFlagSet declares the flags of forkfuzz run.
func runFlagSet(stderr io.Writer) *runOptions {
	o := &runOptions{fs: newFlags("run", stderr)}
	fs, c := o.fs, &o.cfg
	o.sel = targetSetup(fs, "native")
	fs.DurationVar(&c.Duration, "duration", time.Minute, "stop after this long (0: no time limit; --programs must then bound the campaign)")
	fs.IntVar(&c.Programs, "programs", 0, "stop after this many programs (0: no limit; --duration must then bound the campaign)")
	fs.Uint64Var(&c.Seed, "seed", 0, "campaign seed (0: random, printed)")
	fs.StringVar(&c.Workdir, "workdir", "workdir", "where findings are saved")
	fs.IntVar(&c.MinimizeRuns, "minimize-runs", campaign.DefaultMinimizeRuns, fmt.Sprintf("target runs to spend minimizing each new finding (0: the default, %d)", campaign.DefaultMinimizeRuns))
	fs.DurationVar(&c.MinimizeTime, "minimize-time", 2*time.Minute, "time to spend minimizing each new finding (0: no bound; the replays, and aiming a fault-injection finding at its recorded site first, up to 25 runs, come on top)")
	fs.StringVar(&c.Corrupt, "corrupt", "", "TEST ONLY: make the executor falsify observations ("+strings.Join(executor.CorruptionNames(), ", ")+")")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	fs.StringVar(&o.profile, "profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", ")+" (part of what a seed replays)")
	fs.BoolVar(&o.dist, "dist", false, "run through a coordinator and an agent in this process over an embedded NATS JetStream server")
	fs.BoolVar(&c.DigestsFirst, "digests-first", false, "views carry words only where threads race and page digests elsewhere; a run whose verdict needs the words runs again with them (measured no faster: docs/throughput.md)")
	o.cover = coverFlags(fs)
	o.resume = runFlags(fs)
	fs.IntVar(&c.MaxHarnessErrors, "max-harness-errors", campaign.DefaultMaxHarnessErrors, "give up (exit 2) after this many harness errors in a row")
	positive(fs, "max-harness-errors")
	return o
}

// check rejects bad flags before the target is opened, and draws a seed
// when none was given.
func (o *runOptions) check() error {
	c := &o.cfg
	if c.Duration == 0 && c.Programs == 0 {
		return errors.New("set --duration or --programs: nothing else bounds the campaign (SIGINT/SIGTERM end it early)")
	}
	if err := o.cover.check(); err != nil {
		return err
	}
	v := *c
	o.cover.apply(&v) // the coverage flags, which config applies
	if err := v.Validate(); err != nil {
		return flagError(err, campaignFlag)
	}
	if err := o.sel.check(); err != nil {
		return err
	}
	if err := o.sel.checkCorrupt(c.Corrupt); err != nil {
		return err
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	w, err := gen.Profile(o.profile)
	if err != nil {
		return fmt.Errorf("--profile: %v", err)
	}
	c.Weights = w
	return nil
}

// config is the campaign's Config on target t.
func (o *runOptions) config(t agents.Target, stdout, stderr io.Writer) campaign.Config {
	cfg := o.cfg
	cfg.FindingPages, cfg.Target, cfg.Log = report.Files, t, stdout
	cfg.TargetArgs, cfg.Kernel = o.sel.ReplayArgs(t), o.sel.Kernel(t)
	o.cover.apply(&cfg)
	if !o.quiet {
		cfg.Progress = stderr
		if !isTerminal(stderr) {
			cfg.ProgressLines, cfg.ProgressEvery = true, 10*time.Second
		}
	}
	return cfg
}

// printRunSummary prints what a campaign did.
func printRunSummary(stdout io.Writer, st *campaign.Stats, seed uint64, interrupted bool) {
	fmt.Fprintf(stdout, "summary: %d programs, %d forks in %v (%.1f programs/s, %.1f forks/s); %d failing runs, %d unique findings, %d harness errors; seed %d\n",
		st.Programs, st.Forks, st.Elapsed.Round(time.Millisecond), float64(st.Programs)/st.Elapsed.Seconds(),
		float64(st.Forks)/st.Elapsed.Seconds(), st.Events, st.Findings, st.HarnessErrors, seed)
	if st.Refused > 0 {
		fmt.Fprintf(stdout, "refused: %d programs not run: the target had too few free 2 MiB hugetlb pages for their regions (not judged, not harness errors)\n", st.Refused)
	}
	fmt.Fprintf(stdout, "judged: %s\n", st.Judged.String())
	if s := st.Judged.AtFork.String(); s != "" {
		fmt.Fprintf(stdout, "at fork: %s\n", s)
	}
	if st.Events > 0 {
		fmt.Fprintf(stdout, "failures: %d failing runs, %d new findings, %d known from earlier runs in this workdir\n", st.Events, st.Findings, st.Known)
	}
	for _, u := range st.Unconfirmed {
		fmt.Fprintf(stdout, "harness trouble, not counted against the kernel: %s\n", u)
	}
	if l := st.Spent.String(); l != "" {
		fmt.Fprintf(stdout, "time: %s\n", l)
	}
	if st.StatsError != "" {
		fmt.Fprintf(stdout, "stats: %s\n", st.StatsError)
	}
	coverSummary(stdout, st)
	for _, d := range st.Saved {
		fmt.Fprintf(stdout, "finding: %s\n", d)
	}
	for _, d := range st.KnownDirs {
		fmt.Fprintf(stdout, "known finding: %s\n", d)
	}
	if interrupted {
		fmt.Fprintln(stdout, "interrupted: the campaign was stopped by a signal before its bound")
	}
}

// runExit is the exit status of a campaign that ran: an error (fail) when
// nothing was tested or every failure was harness trouble.
func runExit(st *campaign.Stats, fail func(string, ...any) int) int {
	if st.Programs == 0 {
		return fail("no program ran (%d harness errors): nothing was tested", st.HarnessErrors)
	}
	if st.Events > 0 && st.Blamed() == 0 && st.Known == 0 {
		// Every failure was harness trouble that did not come back:
		// nothing about the kernel, and no clean pass either.
		return fail("every failing run was harness trouble that did not come back on replays (listed on stdout): not a finding against the kernel, not a pass")
	}
	if st.Events > 0 {
		return exitFindings
	}
	return exitClean
}

func cmdGen(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("gen", stderr)
	seed := fs.Uint64("seed", 1, "campaign seed")
	n := fs.Int("n", 1, "number of programs")
	first := fs.Int64("index", 0, "index of the first program")
	profile := fs.String("profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	positive(fs, "n")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	w, err := gen.Profile(*profile)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz gen: --profile:", err)
		return exitError
	}
	for i := *first; i < *first+int64(*n); i++ {
		p := gen.Generate(campaign.ProgramRand(*seed, i), w)
		fmt.Fprintf(stdout, "# campaign seed %d, profile %s, program %d\n%s\n", *seed, *profile, i, p.Format())
	}
	return exitClean
}

func cmdExec(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("exec", stderr)
	sel := targetSetup(fs, "native")
	asJSON := fs.Bool("json", false, "print the observation and the issues as JSON")
	corrupt := fs.String("corrupt", "", "TEST ONLY: make the executor falsify the observation")
	noCover := fs.Bool("no-cover", false, "collect no kernel coverage (KCOV), as the run that showed a finding did when its replay command says so")
	noCensus := fs.Bool("no-census", false, "take no page census at forks, as the run that showed a finding did when its replay command says so")
	if err := parseArgs(fs, args, "PROG"); err != nil {
		return parseExit(err)
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	sites, err := programSites(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	if err := sel.checkAll(*corrupt); err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	t, err := sel.Open()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	defer t.Close()
	o, runErr := t.Run(p, agents.Options{Corrupt: *corrupt, NoCover: *noCover, NoForkPages: *noCensus})
	v, err := judge.Judge(p, o, runErr)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	if m := campaign.Missed(o, sites); len(m) > 0 {
		fmt.Fprintf(stderr, "forkfuzz exec: the run missed the fault site PROG's site directive names (%s): it did not test what PROG was written for (the gate aims such a program, docs/rollback.md)\n", strings.Join(m, "; "))
	}
	// A kernel event seen while the target was opened (the --fork-impl
	// calibration's own program broke the kernel) is a finding too: the
	// kernel broke, whatever PROG did after the reboot.
	earlier := pendingIssues(t, map[bool]io.Writer{false: stdout, true: stderr}[*asJSON])
	if !*asJSON {
		code := printVerdict(stdout, o, v, false)
		if earlier > 0 && code == exitClean {
			fmt.Fprintf(stdout, "FAIL: the kernel broke before PROG ran (above): exit 1 although PROG itself passed\n")
			return exitFindings
		}
		return code
	}
	kid := sel.Kernel(t)
	if o != nil {
		kid.Observed = o.Kernel
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", " ")
	enc.Encode(struct {
		Version     string            `json:"forkfuzz"`
		Target      string            `json:"target"`
		Kernel      campaign.KernelID `json:"kernel"`
		Replay      string            `json:"replay"`
		Observation *obs.Observation  `json:"observation,omitempty"`
		Issues      []judge.Issue     `json:"issues"`
		Judged      judge.Judged      `json:"judged"`
		Skipped     []judge.SkippedOp `json:"skipped,omitempty"`
		Notes       []string          `json:"notes,omitempty"`
	}{version.String(), t.Name(), kid, campaign.ReplayCommand(sel.ReplayArgs(t), *corrupt, fs.Arg(0)), o, v.Issues, v.Judged, v.Skipped, v.Notes})
	if !v.OK() || earlier > 0 {
		return exitFindings
	}
	return exitClean
}

// pendingIssues prints the findings of events t saw while it was opened
// (agents.PendingEvents) and returns how many there were.
func pendingIssues(t agents.Target, w io.Writer) int {
	pt, ok := t.(agents.PendingEvents)
	if !ok {
		return 0
	}
	n := 0
	for _, pe := range pt.TakePending() {
		pv, err := judge.Judge(pe.Program, nil, pe.Err)
		if err != nil || pv.OK() {
			continue
		}
		for _, is := range pv.Issues {
			n++
			fmt.Fprintf(w, "FAIL [%s] %s (seen in %s, before PROG ran)\n", is.Oracle, is.Signature, pe.Note)
		}
	}
	return n
}

// printVerdict prints v (with what was judged, what was skipped and why)
// and returns the exit status.
func printVerdict(w io.Writer, o *obs.Observation, v *judge.Verdict, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		enc.Encode(struct {
			Observation *obs.Observation  `json:"observation,omitempty"`
			Issues      []judge.Issue     `json:"issues"`
			Judged      judge.Judged      `json:"judged"`
			Skipped     []judge.SkippedOp `json:"skipped,omitempty"`
			Notes       []string          `json:"notes,omitempty"`
		}{o, v.Issues, v.Judged, v.Skipped, v.Notes})
	} else {
		if v.OK() {
			fmt.Fprintln(w, "ok: every oracle passed")
		}
		for _, is := range v.Issues {
			fmt.Fprintf(w, "FAIL [%s] %s\n%s\n\n", is.Oracle, is.Signature, is.Explanation)
		}
		if v.Omitted > 0 {
			fmt.Fprintf(w, "(and %d more findings of the same oracles)\n", v.Omitted)
		}
		fmt.Fprintln(w, v.Summary())
		for _, s := range v.Skipped {
			fmt.Fprintf(w, "skipped: op %d `%s`: %s\n", s.Op, s.Text, s.Reason)
		}
		for _, n := range v.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
		if a := v.Judged.AtFork; a != nil && a.String() != "" {
			fmt.Fprintf(w, "at fork: %s\n", a)
		}
	}
	if !v.OK() {
		return exitFindings
	}
	return exitClean
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	asJSON := fs.Bool("json", false, "print the issues as JSON")
	if err := parseArgs(fs, args, "PROG OBS"); err != nil {
		return parseExit(err)
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz check:", err)
		return exitError
	}
	o, err := readObservation(fs.Arg(1), p)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz check:", err)
		return exitError
	}
	v, err := judge.Judge(p, o, nil)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz check:", err)
		return exitError
	}
	return printVerdict(stdout, nil, v, *asJSON)
}

func readObservation(path string, p *prog.Program) (*obs.Observation, error) {
	b, err := readLimited(path, maxObservationFile, "observation")
	if err != nil {
		return nil, err
	}
	var o obs.Observation
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(b, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: %v", path, line, col, err)
		case errors.As(err, &te):
			line, col := lineCol(b, te.Offset)
			return nil, fmt.Errorf("%s:%d:%d: field %s: %v", path, line, col, te.Field, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if o.Version != obs.Version {
		return nil, fmt.Errorf("%s: observation version %d, this forkfuzz reads %d", path, o.Version, obs.Version)
	}
	if len(o.Ops) != len(p.Ops) {
		return nil, fmt.Errorf("%s: field ops: %d results for a program of %d operations", path, len(o.Ops), len(p.Ops))
	}
	if err := validateObservation(&o, p); err != nil {
		return nil, fmt.Errorf("%s: observation invalid: %w", path, err)
	}
	return &o, nil
}

func lineCol(b []byte, off int64) (int, int) {
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func cmdMinimize(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("minimize", stderr)
	sel := targetSetup(fs, "native")
	sig := fs.String("signature", "", "signature to preserve (default: the first issue of the first run)")
	runs := fs.Int("runs", 300, "target runs to spend")
	corrupt := fs.String("corrupt", "", "TEST ONLY: make the executor falsify observations")
	positive(fs, "runs")
	if err := parseArgs(fs, args, "PROG"); err != nil {
		return parseExit(err)
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz minimize:", err)
		return exitError
	}
	if err := sel.checkAll(*corrupt); err != nil {
		fmt.Fprintln(stderr, "forkfuzz minimize:", err)
		return exitError
	}
	t, err := sel.Open()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz minimize:", err)
		return exitError
	}
	defer t.Close()
	if *sig == "" {
		o, runErr := t.Run(p, agents.Options{Corrupt: *corrupt})
		v, err := judge.Judge(p, o, runErr)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz minimize:", err)
			return exitError
		}
		if v.OK() {
			fmt.Fprintln(stderr, "forkfuzz minimize: the program passes every oracle; nothing to minimize")
			if pendingIssues(t, stderr) > 0 {
				fmt.Fprintln(stderr, "forkfuzz minimize: but the kernel broke before the program ran (above): exit 1")
				return exitFindings
			}
			return exitClean
		}
		*sig = v.Issues[0].Signature
	}
	// With --signature the program gets up to three runs to show it (a
	// race that fires one run in two or three), and every minimization
	// step as many as it needed (campaign.Reduce).
	f := &campaign.Finding{Issue: judge.Issue{Signature: *sig}, Program: p}
	campaign.Reduce(t, f, *runs, 0, *corrupt)
	if f.NotRepeated {
		fmt.Fprintf(stderr, "forkfuzz minimize: the program did not show %s in %d runs (%d replays of it: %d did)\n", *sig, f.MinRuns, f.Replays, f.Reproduced)
		return exitError
	}
	race := ""
	if f.MinTries > 1 {
		race = fmt.Sprintf(", up to %d a step (it showed the signature on run %d: a race)", f.MinTries, f.MinTries)
	}
	fmt.Fprintf(stderr, "minimized %s: %d -> %d ops in %d runs%s; reproduced %d/%d\n", *sig, len(p.Ops), len(f.Minimized.Ops), f.MinRuns, race, f.Reproduced, f.Replays)
	stdout.Write(f.Minimized.Format())
	return exitFindings
}

func cmdExecutor(args []string, stdout, stderr io.Writer) int {
	executor.Serve()
	return exitError
}
