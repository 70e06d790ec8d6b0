// Command forkfuzz fuzzes and consistency-checks implementations of fork().
//
// Exit status: 0 clean, 1 findings, 2 errors.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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

const (
	exitClean    = 0
	exitFindings = 1
	exitError    = 2
)

type command struct {
	name, args, help string
	run              func(args []string, stdout, stderr io.Writer) int
	hidden           bool
}

// commands lists the subcommands; other files of this package append theirs
// in init functions.
var commands = []command{
	{name: "run", args: "[flags]", help: "run a fuzzing campaign", run: cmdRun},
	{name: "gen", args: "[flags]", help: "print generated programs", run: cmdGen},
	{name: "exec", args: "[flags] PROG", help: "run one program and print the verdict", run: cmdExec},
	{name: "check", args: "PROG OBS", help: "re-judge a recorded observation (JSON) of a program", run: cmdCheck},
	{name: "minimize", args: "[flags] PROG", help: "shrink a failing program while its finding reproduces", run: cmdMinimize},
	{name: "executor", help: "serve as an executor process (started by forkfuzz itself)", run: cmdExecutor, hidden: true},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return exitError
		}
		return exitClean
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "forkfuzz: unknown command %q\n", args[0])
	usage(stderr)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: forkfuzz COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-9s %-14s %s\n", c.name, c.args, c.help)
		}
	}
	fmt.Fprintln(w, "\nexit status: 0 clean, 1 findings, 2 errors. 'forkfuzz COMMAND -h' for flags.")
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("forkfuzz "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// targetKind is one kind of --target: the flags it takes and how to open it.
type targetKind struct {
	help string
	// flags registers the kind's own flags on a command's flag set and
	// returns the function that opens the target once flags are parsed.
	flags func(fs *flag.FlagSet) func() (agents.Target, error)
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
// after parsing to open the chosen target.
func targetFlags(fs *flag.FlagSet, def string) func() (agents.Target, error) {
	var names []string
	for n := range targetKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	var help []string
	for _, n := range names {
		help = append(help, n+" ("+targetKinds[n].help+")")
	}
	name := fs.String("target", def, "where programs run: "+strings.Join(help, ", "))
	openers := make(map[string]func() (agents.Target, error))
	for _, n := range names {
		openers[n] = targetKinds[n].flags(fs)
	}
	return func() (agents.Target, error) {
		open, ok := openers[*name]
		if !ok {
			return nil, fmt.Errorf("unknown target %q (want one of %s)", *name, strings.Join(names, ", "))
		}
		return open()
	}
}

func readProgram(path string) (*prog.Program, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := prog.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, withColon(err))
	}
	return p, nil
}

// withColon makes "path:" + err read as "path:LINE:COL: msg" or "path: msg".
func withColon(err error) error {
	var se *prog.SyntaxError
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf(" %w", err)
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	openTarget := targetFlags(fs, "native")
	duration := fs.Duration("duration", time.Minute, "stop after this long (0: no limit)")
	programs := fs.Int("programs", 0, "stop after this many programs (0: no limit)")
	seed := fs.Uint64("seed", 0, "campaign seed (0: random, printed)")
	workdir := fs.String("workdir", "workdir", "where findings are saved")
	minRuns := fs.Int("minimize-runs", 300, "target runs to spend minimizing each new finding")
	minTime := fs.Duration("minimize-time", 2*time.Minute, "time to spend minimizing each new finding (0: no bound)")
	corrupt := fs.String("corrupt", "", "TEST ONLY: make the executor falsify observations ("+strings.Join(executor.CorruptionNames(), ", ")+")")
	quiet := fs.Bool("q", false, "no progress line")
	profile := fs.String("profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", ")+" (part of what a seed replays)")
	overJS := fs.Bool("dist", false, "run through a coordinator and an agent in this process over an embedded NATS JetStream server")
	coverCfg := coverFlags(fs)
	if fs.Parse(args) != nil {
		return exitError
	}
	if *duration == 0 && *programs == 0 {
		fmt.Fprintln(stderr, "forkfuzz run: set --duration or --programs")
		return exitError
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	weights, err := gen.Profile(*profile)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz run: --profile:", err)
		return exitError
	}
	t, err := openTarget()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz run:", err)
		return exitError
	}
	defer t.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := campaign.Config{
		Target: t, Seed: *seed, Duration: *duration, Programs: *programs, Workdir: *workdir,
		Weights: weights, Log: stdout, MinimizeRuns: *minRuns, MinimizeTime: *minTime, Corrupt: *corrupt,
	}
	coverCfg(&cfg)
	if !*quiet {
		cfg.Progress = stderr
	}
	if *overJS {
		stop()
		return runDist(t, fs.Lookup("target").Value.String(), cfg, *minRuns, *minTime, stdout, stderr)
	}
	st, err := campaign.Run(ctx, cfg)
	if st != nil {
		fmt.Fprintf(stdout, "summary: %d programs, %d forks in %v (%.1f programs/s, %.1f forks/s); %d failing runs, %d unique findings, %d harness errors; seed %d\n",
			st.Programs, st.Forks, st.Elapsed.Round(time.Millisecond), float64(st.Programs)/st.Elapsed.Seconds(),
			float64(st.Forks)/st.Elapsed.Seconds(), st.Events, st.Findings, st.HarnessErrors, *seed)
		fmt.Fprintf(stdout, "judged: %s\n", st.Judged.String())
		coverSummary(stdout, st)
		for _, d := range st.Saved {
			fmt.Fprintf(stdout, "finding: %s\n", d)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz run:", err)
		return exitError
	}
	if st.Findings > 0 {
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
	if fs.Parse(args) != nil {
		return exitError
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
	openTarget := targetFlags(fs, "native")
	asJSON := fs.Bool("json", false, "print the observation and the issues as JSON")
	corrupt := fs.String("corrupt", "", "TEST ONLY: make the executor falsify the observation")
	if fs.Parse(args) != nil {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: forkfuzz exec [flags] PROG")
		return exitError
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	t, err := openTarget()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	defer t.Close()
	o, runErr := t.Run(p, agents.Options{Corrupt: *corrupt})
	v, err := judge.Judge(p, o, runErr)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz exec:", err)
		return exitError
	}
	return printVerdict(stdout, o, v, *asJSON)
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
	}
	if !v.OK() {
		return exitFindings
	}
	return exitClean
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	asJSON := fs.Bool("json", false, "print the issues as JSON")
	if fs.Parse(args) != nil {
		return exitError
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: forkfuzz check PROG OBS")
		return exitError
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
	b, err := os.ReadFile(path)
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
	openTarget := targetFlags(fs, "native")
	sig := fs.String("signature", "", "signature to preserve (default: the first issue of the first run)")
	runs := fs.Int("runs", 300, "target runs to spend")
	corrupt := fs.String("corrupt", "", "TEST ONLY: make the executor falsify observations")
	if fs.Parse(args) != nil {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: forkfuzz minimize [flags] PROG")
		return exitError
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz minimize:", err)
		return exitError
	}
	t, err := openTarget()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz minimize:", err)
		return exitError
	}
	defer t.Close()
	opt := agents.Options{Corrupt: *corrupt}
	o, runErr := t.Run(p, opt)
	v, err := judge.Judge(p, o, runErr)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz minimize:", err)
		return exitError
	}
	if *sig == "" {
		if v.OK() {
			fmt.Fprintln(stderr, "forkfuzz minimize: the program passes every oracle; nothing to minimize")
			return exitClean
		}
		*sig = v.Issues[0].Signature
	} else if !v.Has(*sig) {
		fmt.Fprintf(stderr, "forkfuzz minimize: the program does not show %s\n", *sig)
		return exitError
	}
	f := &campaign.Finding{Issue: judge.Issue{Signature: *sig}, Program: p}
	campaign.Reduce(t, f, *runs, 0, *corrupt)
	fmt.Fprintf(stderr, "minimized %s: %d -> %d ops in %d runs; reproduced %d/%d\n", *sig, len(p.Ops), len(f.Minimized.Ops), f.MinRuns, f.Reproduced, f.Replays)
	stdout.Write(f.Minimized.Format())
	return exitFindings
}

func cmdExecutor(args []string, stdout, stderr io.Writer) int {
	executor.Serve()
	return exitError
}
