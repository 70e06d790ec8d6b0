package main

// The command-line conventions every forkfuzz command follows, kept in
// one place (issue 29):
//
//   - -h or --help anywhere among a command's flags prints its usage on
//     stdout and exits 0; dispatch decides this before the command runs
//     (showHelp), so no command can get the exit status wrong. So does
//     "forkfuzz help COMMAND".
//   - "forkfuzz --version" and "forkfuzz version" print the version.
//   - A mistyped command or subcommand is exit 2 with "did you mean X?".
//   - A flag the flag package rejects is one line naming it and what is
//     wrong and one line pointing to COMMAND -h, not the whole usage.
//   - Flags go before a command's arguments (parseArgs): a flag after
//     them is an error, not an argument or a silently dropped flag ("--"
//     ends the flags, for an argument that starts with "-"), and a command
//     without arguments rejects any word among its flags.
//   - No numeric flag is negative, NaN or infinite, and none a command
//     lists as positive is 0: checked by name before anything runs.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/forkfuzz/forkfuzz/checker"
)

// subcommands maps a command whose first argument names a subcommand
// (bench, kernel) to its subcommands; other files add theirs in init
// functions. runSub runs them.
var subcommands = map[string][]command{}

// findCommand is the command called name: "run", or "bench fork".
func findCommand(name string) (command, bool) {
	group, sub, isSub := strings.Cut(name, " ")
	list := commands
	if isSub {
		list, name = subcommands[group], sub
	}
	for _, c := range list {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// visibleNames are the names of list's commands that usage shows.
func visibleNames(list []command) []string {
	var names []string
	for _, c := range list {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return names
}

// isHelpFlag reports whether a is -h, --help, -help or --h (with or
// without =VALUE): what the flag package answers with flag.ErrHelp.
func isHelpFlag(a string) bool {
	if !strings.HasPrefix(a, "-") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
	return name == "h" || name == "help"
}

// wantsHelp reports whether args, a command's arguments, ask for its
// usage: a help flag before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// showHelp prints c's usage (or, with a subcommand first in args, the
// subcommand's) on stdout and returns exit status 0. A command prints its
// usage from its flag set when its only argument is -h; its exit status
// is ignored (report's is 2, say), the usage is what was asked for.
func showHelp(c command, args []string, stdout io.Writer) int {
	if c.hidden && c.args == "" {
		fmt.Fprintf(stdout, "forkfuzz %s: %s; not for use by hand\n", c.name, c.help)
		return exitClean
	}
	if subs, ok := subcommands[c.name]; ok {
		for _, s := range subs {
			if len(args) > 0 && args[0] == s.name {
				s.run([]string{"-h"}, stdout, stdout)
				return exitClean
			}
		}
		groupUsage(stdout, c)
		return exitClean
	}
	c.run([]string{"-h"}, stdout, stdout)
	return exitClean
}

// groupUsage lists the subcommands of c.
func groupUsage(w io.Writer, c command) {
	fmt.Fprintf(w, "usage: forkfuzz %s %s\n%s\n\nsubcommands:\n", c.name, c.args, c.help)
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	for _, s := range subcommands[c.name] {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.name, s.args, s.help)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n'forkfuzz %s SUBCOMMAND -h' for its flags.\n", c.name)
}

// runSub runs the subcommand of group that args[0] names.
func runSub(group string, args []string, stdout, stderr io.Writer) int {
	subs := subcommands[group]
	if len(args) == 0 {
		fmt.Fprintf(stderr, "forkfuzz %s: want a subcommand: %s ('forkfuzz %s -h' says what they do)\n", group, strings.Join(visibleNames(subs), ", "), group)
		return exitError
	}
	if args[0] == "help" {
		c, _ := findCommand(group)
		return showHelp(c, args[1:], stdout)
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:], stdout, stderr)
		}
	}
	unknownName(stderr, "forkfuzz "+group, "subcommand", args[0], visibleNames(subs), "'forkfuzz "+group+" -h' lists them")
	return exitError
}

// unknownName reports word, not one of names, on two lines: what it is
// not, with the nearest names ("did you mean"), and where to look.
func unknownName(w io.Writer, who, what, word string, names []string, look string) {
	msg := fmt.Sprintf("%s: unknown %s %q", who, what, word)
	if near := nearest(word, names); len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	fmt.Fprintf(w, "%s\n%s: %s\n", msg, who, look)
}

// nearest returns the names closest to word: within an edit distance
// (optimal string alignment: a swap of two neighbours is one edit) of
// a third of word's length, at least 1, or starting with it; the nearest
// first, at most three. Leading dashes of word are ignored (--run).
func nearest(word string, names []string) []string {
	word = strings.ToLower(strings.TrimLeft(word, "-"))
	if word == "" {
		return nil
	}
	limit := max(1, len(word)/3)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		d := editDistance(word, n)
		if len(word) >= 2 && strings.HasPrefix(n, word) {
			d = min(d, limit)
		}
		if d <= limit && d < len(n) {
			cs = append(cs, cand{n, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i, c := range cs {
		if i == 3 {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and swaps of adjacent bytes.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// flagOut is the output of a flag set made by newFlags. The flag package
// writes an error message to it before calling Usage; flagOut prefixes
// the message with the command and remembers it, so that Usage only
// points to -h instead of printing every flag. It also holds the numeric
// flags the command wants positive (positive).
type flagOut struct {
	w        io.Writer
	name     string // the command: "bench fork"
	failed   bool
	positive map[string]bool
}

func (o *flagOut) Write(p []byte) (int, error) {
	if !o.failed {
		o.failed = true
		io.WriteString(o.w, "forkfuzz "+o.name+": ")
	}
	return o.w.Write(p)
}

// newFlags is the flag set of command name ("run", "bench fork"), its
// errors written to stderr. Parse it with parseArgs.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("forkfuzz "+name, flag.ContinueOnError)
	o := &flagOut{w: stderr, name: name, positive: map[string]bool{}}
	fs.SetOutput(o)
	fs.Usage = func() {
		if o.failed {
			help := name
			if _, ok := findCommand(name); !ok {
				help, _, _ = strings.Cut(name, " ")
			}
			fmt.Fprintf(o.w, "forkfuzz %s: 'forkfuzz %s -h' lists the flags\n", name, help)
			return
		}
		flagUsage(o.w, fs, name)
	}
	return fs
}

// flagUsage prints the usage of command name and the flags of fs.
func flagUsage(w io.Writer, fs *flag.FlagSet, name string) {
	c, _ := findCommand(name)
	fmt.Fprintln(w, strings.TrimSpace("usage: forkfuzz "+name+" "+c.args))
	if c.help != "" {
		fmt.Fprintln(w, c.help)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags (before the arguments; -flag and --flag are the same):")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// flagOutOf is fs's flagOut (fs made by newFlags).
func flagOutOf(fs *flag.FlagSet) *flagOut {
	o, ok := fs.Output().(*flagOut)
	if !ok {
		panic(fs.Name() + ": a flag set not made by newFlags")
	}
	return o
}

// positive marks numeric flags of fs that must be more than 0 (parseArgs
// checks them; every numeric flag is checked for >= 0).
func positive(fs *flag.FlagSet, names ...string) {
	o := flagOutOf(fs)
	for _, n := range names {
		if fs.Lookup(n) == nil {
			panic(fs.Name() + ": positive: no flag --" + n)
		}
		o.positive[n] = true
	}
}

// parseArgs parses args into fs (made by newFlags) and checks them. want
// names the command's positional arguments as its usage does: "" for
// none, "PROG", "PROG OBS", "OUT.svg NAME=CSV..." (a last name ending in
// "..." takes one or more). Flags go before the arguments: a word among
// the flags of a command that takes none, or a flag after the arguments
// (unless "--" ended the flags), is an error naming it. Then every
// numeric flag is checked (checkNumbers). Every error is printed (one
// line; a flag the flag package rejects gets a line pointing to -h too)
// and returned; -h gives flag.ErrHelp (parseExit). A word among the
// flags is reported first (the flags after it were not parsed), then a
// bad number, then a missing argument.
func parseArgs(fs *flag.FlagSet, args []string, want string) error {
	o := flagOutOf(fs)
	o.failed = false
	if err := fs.Parse(args); err != nil {
		return err
	}
	fail := func(format string, a ...any) error {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(o.w, "forkfuzz %s: %v\n", o.name, err)
		return err
	}
	rest := fs.Args()
	ended := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"
	names := strings.Fields(want)
	if len(names) == 0 && len(rest) > 0 {
		return fail("unexpected argument %q (%s takes flags only)", rest[0], o.name)
	}
	if !ended {
		for _, a := range rest {
			if strings.HasPrefix(a, "-") && a != "-" {
				return fail("unexpected argument %q (flags go before %s)", a, want)
			}
		}
	}
	variadic := len(names) > 0 && strings.HasSuffix(names[len(names)-1], "...")
	if len(rest) > len(names) && !variadic {
		return fail("unexpected argument %q (want %s)", rest[len(names)], want)
	}
	if err := checkNumbers(fs, o.positive); err != nil {
		return fail("%v", err)
	}
	if len(rest) < len(names) {
		return fail("missing %s (usage: forkfuzz %s [flags] %s)", strings.Join(names[len(rest):], " "), o.name, want)
	}
	return nil
}

// zeroMeans finds what a flag's usage says 0 means: "(0: no gate)".
var zeroMeans = regexp.MustCompile(`\(0: [^()]*\)`)

// checkNumbers rejects a numeric flag of fs that is negative, NaN or
// infinite, or 0 and named in positive, naming the flag and its value.
func checkNumbers(fs *flag.FlagSet, positive map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if err != nil || !ok {
			return
		}
		var neg, zero, dur bool
		switch v := g.Get().(type) {
		case int:
			neg, zero = v < 0, v == 0
		case int64:
			neg, zero = v < 0, v == 0
		case uint:
			zero = v == 0
		case uint64:
			zero = v == 0
		case time.Duration:
			neg, zero, dur = v < 0, v == 0, true
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				err = fmt.Errorf("%s %s: want a finite number", flagName(f.Name), f.Value)
				return
			}
			neg, zero = v < 0, v == 0
		default:
			return
		}
		if !neg && !(zero && positive[f.Name]) {
			return
		}
		what := "a number >= 0"
		switch {
		case positive[f.Name] && dur:
			what = "a positive duration"
		case positive[f.Name]:
			what = "a number > 0"
		case dur:
			what = "a duration >= 0"
		}
		if z := zeroMeans.FindString(f.Usage); z != "" && !positive[f.Name] {
			what += " " + z
		}
		err = fmt.Errorf("%s %s: want %s", flagName(f.Name), f.Value, what)
	})
	return err
}

// flagName is how messages write flag name: -n, --duration.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// parseExit is the exit status of a failed parseArgs: 0 for -h/--help
// (the flag package printed the usage), 2 otherwise.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitClean
	}
	return exitError
}

// releaseFlag is a kernel release flag (uname -r's form, "" for none): a
// value that is not one is a flag error, where the model would silently
// follow the newest kernel it knows (checker.ParseRelease).
type releaseFlag string

func (r *releaseFlag) String() string { return string(*r) }

func (r *releaseFlag) Set(s string) error {
	if s != "" {
		if _, _, err := checker.ParseRelease(s); err != nil {
			return err
		}
	}
	*r = releaseFlag(s)
	return nil
}

// releaseVar adds a releaseFlag called name to fs.
func releaseVar(fs *flag.FlagSet, name, usage string) *releaseFlag {
	r := new(releaseFlag)
	fs.Var(r, name, usage)
	return r
}
