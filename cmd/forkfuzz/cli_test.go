package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/internal/version"
)

// hasLine reports whether text has line as one of its lines.
func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestConventions: the command-line conventions of cli.go, one row per
// case: the arguments, the exit status and a line the command must print
// (on stdout or stderr). An error is at most two lines on stderr (what is
// wrong, and where to look), never the usage; help goes to stdout.
func TestConventions(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "out.csv")
	for _, c := range []struct {
		args []string
		code int
		line string
	}{
		// -h and --help exit 0 and print the usage on every command.
		{[]string{"report", "-h"}, exitClean, "usage: forkfuzz report WORKDIR"},
		{[]string{"report", "--help"}, exitClean, "usage: forkfuzz report WORKDIR"},
		{[]string{"bench", "-h"}, exitClean, "usage: forkfuzz bench fork|mutants [flags]"},
		{[]string{"bench", "fork", "-h"}, exitClean, "usage: forkfuzz bench fork [flags]"},
		{[]string{"bench", "fork", "--reps", "2", "--help"}, exitClean, "usage: forkfuzz bench fork [flags]"},
		{[]string{"cover", "-h"}, exitClean, "usage: forkfuzz cover [flags] WORKDIR"},
		{[]string{"cover-plot", "--help"}, exitClean, "usage: forkfuzz cover-plot [flags] OUT.svg NAME=CSV..."},
		{[]string{"redis", "-h"}, exitClean, "usage: forkfuzz redis [flags]"},
		{[]string{"repro-c", "-h"}, exitClean, "usage: forkfuzz repro-c [flags] PROG"},
		{[]string{"exec", "testdata/clean.ffz", "-h"}, exitClean, "usage: forkfuzz exec [flags] PROG"},
		{[]string{"version", "-h"}, exitClean, "print forkfuzz's version and commit"},
		{[]string{"kernel", "check", "-h"}, exitClean, "usage: forkfuzz kernel check IMAGE-or-.config"},
		{[]string{"kernel", "help"}, exitClean, "usage: forkfuzz kernel build|check|module ..."},
		{[]string{"help", "sweep"}, exitClean, "usage: forkfuzz sweep [flags] PROG"},
		{[]string{"help", "bench", "mutants"}, exitClean, "usage: forkfuzz bench mutants [flags]"},
		{[]string{"agent", "-h"}, exitClean, "usage: forkfuzz worker --coordinator URL"},
		{[]string{"executor", "-h"}, exitClean, "forkfuzz executor: serve as an executor process (started by forkfuzz itself); not for use by hand"},
		{[]string{"--help"}, exitClean, "usage: forkfuzz COMMAND [flags]"},
		{[]string{}, exitError, "usage: forkfuzz COMMAND [flags]"},
		// The version.
		{[]string{"--version"}, exitClean, version.String()},
		{[]string{"version"}, exitClean, version.String()},
		// A mistyped command or subcommand.
		{[]string{"rnu"}, exitError, `forkfuzz: unknown command "rnu" (did you mean run?)`},
		{[]string{"minimise", "x.ffz"}, exitError, `forkfuzz: unknown command "minimise" (did you mean minimize?)`},
		{[]string{"cov"}, exitError, `forkfuzz: unknown command "cov" (did you mean cover or cover-plot?)`},
		{[]string{"help", "verison"}, exitError, `forkfuzz: unknown command "verison" (did you mean version?)`},
		{[]string{"zzzz"}, exitError, `forkfuzz: unknown command "zzzz"`},
		{[]string{"bench", "forks"}, exitError, `forkfuzz bench: unknown subcommand "forks" (did you mean fork?)`},
		{[]string{"kernel", "chekc"}, exitError, `forkfuzz kernel: unknown subcommand "chekc" (did you mean check?)`},
		{[]string{"kernel"}, exitError, "forkfuzz kernel: want a subcommand: build, check, module ('forkfuzz kernel -h' says what they do)"},
		// A flag error: one line naming the flag, one pointing to -h.
		{[]string{"run", "--bogus"}, exitError, "forkfuzz run: flag provided but not defined: -bogus"},
		{[]string{"run", "--bogus"}, exitError, "forkfuzz run: 'forkfuzz run -h' lists the flags"},
		{[]string{"run", "--duration", "x"}, exitError, `forkfuzz run: invalid value "x" for flag -duration: parse error`},
		{[]string{"bench", "fork", "--reps"}, exitError, "forkfuzz bench fork: flag needs an argument: -reps"},
		{[]string{"bench", "fork", "--reps"}, exitError, "forkfuzz bench fork: 'forkfuzz bench fork -h' lists the flags"},
		{[]string{"report", "--bogus"}, exitError, "forkfuzz report: flag provided but not defined: -bogus"},
		// Flags go before the arguments; a stray word is an error.
		{[]string{"bench", "fork", "--reps", "2", "extra", "--csv", csv}, exitError, `forkfuzz bench fork: unexpected argument "extra" (bench fork takes flags only)`},
		{[]string{"redis", "extra", "--svg", csv}, exitError, `forkfuzz redis: unexpected argument "extra" (redis takes flags only)`},
		{[]string{"exec", "testdata/clean.ffz", "--json"}, exitError, `forkfuzz exec: unexpected argument "--json" (flags go before PROG)`},
		{[]string{"cover-plot", "o.svg", "a=b.csv", "--title", "x"}, exitError, `forkfuzz cover-plot: unexpected argument "--title" (flags go before OUT.svg NAME=CSV...)`},
		{[]string{"exec", "a.ffz", "b.ffz"}, exitError, `forkfuzz exec: unexpected argument "b.ffz" (want PROG)`},
		{[]string{"exec"}, exitError, "forkfuzz exec: missing PROG (usage: forkfuzz exec [flags] PROG)"},
		{[]string{"check", "a.ffz"}, exitError, "forkfuzz check: missing OBS (usage: forkfuzz check [flags] PROG OBS)"},
		{[]string{"exec", "--", "-no-such.ffz"}, exitError, "forkfuzz exec: open -no-such.ffz: no such file or directory"},
		{[]string{"exec", "testdata/bad-site.ffz"}, exitError, "forkfuzz exec: testdata/bad-site.ffz:1: site directive: the program has no fork f3"},
		// Numeric flags, checked by name before anything runs.
		{[]string{"bench", "fork", "--max-ratio", "-1"}, exitError, "forkfuzz bench fork: --max-ratio -1: want a number >= 0 (0: no gate)"},
		{[]string{"bench", "fork", "--max-ratio", "NaN"}, exitError, "forkfuzz bench fork: --max-ratio NaN: want a finite number"},
		{[]string{"bench", "fork", "--at-size", "1G"}, exitError, "forkfuzz bench fork: --at-size: a flag of the latency gate, which is off without --max-ratio"},
		{[]string{"bench", "fork", "--reps", "0"}, exitError, "forkfuzz bench fork: --reps 0: want a number > 0"},
		{[]string{"redis", "--rounds", "0"}, exitError, "forkfuzz redis: --rounds 0: want a number > 0"},
		{[]string{"redis", "--value-size", "10"}, exitError, "forkfuzz redis: --value-size 10: want at least 24 bytes (room for the version number each value carries)"},
		{[]string{"run", "--duration", "-1s"}, exitError, "forkfuzz run: --duration -1s: want a duration >= 0 (0: no time limit; --programs must then bound the campaign)"},
		{[]string{"gen", "-n", "0"}, exitError, "forkfuzz gen: -n 0: want a number > 0"},
		{[]string{"run", "--target", "sim", "--programs", "1", "--blind", "--no-states"}, exitError, "forkfuzz run: --no-states: a blind campaign ignores memory states already (memory states guide only a --guided campaign)"},
		{[]string{"run", "--target", "sim", "--programs", "1", "--no-states"}, exitError, "forkfuzz run: --no-states: a blind campaign ignores memory states already (memory states guide only a --guided campaign)"},
		{[]string{"run", "--target", "sim", "--programs", "1", "--blind", "--guided"}, exitError, "forkfuzz run: --guided: a campaign is blind (the default, --blind) or guided, not both"},
		{[]string{"run", "--target", "sim", "--programs", "1", "--guided", "--no-cover", "--no-states"}, exitError, "forkfuzz run: --no-states: without coverage nothing would be left to guide by (a blind campaign is that)"},
		{[]string{"bench", "mutants", "--kernel", "testdata/clean.ffz", "--blind", "--no-states"}, exitError, "forkfuzz bench mutants: --no-states: a blind campaign ignores memory states already (memory states guide only a --guided campaign)"},
		{[]string{"sim-bench", "--budget", "0s"}, exitError, "forkfuzz sim-bench: --budget 0s: want a positive duration"},
		{[]string{"status", "--stale", "0s"}, exitError, "forkfuzz status: --stale 0s: want a positive duration"},
		{[]string{"exec", "--target", "qemu", "--vms", "0", "testdata/clean.ffz"}, exitError, "forkfuzz exec: --vms 0: want a number > 0"},
		// Kernel releases.
		{[]string{"repro-c", "--kernel", "v6.1.192", "testdata/clean.ffz"}, exitError,
			`forkfuzz repro-c: invalid value "v6.1.192" for flag -kernel: "v6.1.192" is not a kernel release: want uname -r's form, e.g. 6.1.192 or 6.1.0-28-cloud-amd64`},
		{[]string{"modelcmp", "--model-kernel", "garbage"}, exitError,
			`forkfuzz modelcmp: invalid value "garbage" for flag -model-kernel: "garbage" is not a kernel release: want uname -r's form, e.g. 6.1.192 or 6.1.0-28-cloud-amd64`},
		{[]string{"repro-c", "--kernel", "6.1.0-28-cloud-amd64", "testdata/clean.ffz"}, exitClean,
			"/* forkfuzz C reproducer: generated by 'forkfuzz repro-c'. Standalone."},
	} {
		name := "forkfuzz " + strings.Join(c.args, " ")
		code, out, errs := forkfuzz(t, c.args...)
		if code != c.code || !hasLine(out, c.line) && !hasLine(errs, c.line) {
			t.Errorf("%s: exit %d, want %d and the line\n\t%s\nstdout: %.600s\nstderr: %.600s", name, code, c.code, c.line, out, errs)
			continue
		}
		if n := strings.Count(errs, "\n"); c.code == exitError && len(c.args) > 0 && n > 2 {
			t.Errorf("%s: %d lines on stderr, want at most 2:\n%s", name, n, errs)
		}
		if c.code == exitClean && errs != "" {
			t.Errorf("%s: exit 0 with stderr %q", name, errs)
		}
	}
}

// TestEveryCommandHelp: -h, --help and help CMD print every command's and
// subcommand's usage on stdout and exit 0.
func TestEveryCommandHelp(t *testing.T) {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
		for _, s := range subcommands[c.name] {
			names = append(names, c.name+" "+s.name)
		}
	}
	for _, name := range names {
		c, _ := findCommand(name)
		want := "usage: forkfuzz " + name
		if c.hidden && c.args == "" {
			want = "forkfuzz " + name + ": "
		} else if c.hidden {
			want = "usage: forkfuzz "
		}
		for _, args := range [][]string{append(strings.Fields(name), "-h"), append(strings.Fields(name), "--help"), append([]string{"help"}, strings.Fields(name)...)} {
			code, out, errs := forkfuzz(t, args...)
			if code != exitClean || !strings.HasPrefix(out, want) || errs != "" {
				t.Errorf("forkfuzz %s: exit %d, want 0 and stdout starting with %q\nstdout: %.300s\nstderr: %.300s", strings.Join(args, " "), code, want, out, errs)
			}
		}
	}
	if len(names) < 25 {
		t.Fatalf("only %d commands and subcommands: %v", len(names), names)
	}
}

// TestNumericFlagsChecked: every numeric flag of every command (as its
// usage lists it) set to -1 is exit 2 and a line naming the flag, before
// anything runs. (Not ci: ci.go parses and checks its own flags.)
func TestNumericFlagsChecked(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -(\S+) (int|int64|uint|uint64|float|duration)$`)
	checked := 0
	for _, c := range commands {
		if c.hidden || c.name == "ci" {
			continue
		}
		cmds := [][]string{{c.name}}
		for _, s := range subcommands[c.name] {
			cmds = append(cmds, []string{c.name, s.name})
		}
		for _, cmd := range cmds {
			_, usage, _ := forkfuzz(t, append(cmd, "-h")...)
			for _, m := range flagLine.FindAllStringSubmatch(usage, -1) {
				val := "-1"
				if m[2] == "duration" {
					val = "-1s"
				}
				args := append(append([]string{}, cmd...), "--"+m[1], val)
				code, out, errs := forkfuzz(t, args...)
				named := strings.Contains(errs, "-"+m[1]+" ") || strings.Contains(errs, "-"+m[1]+":")
				if code != exitError || !named || strings.Count(errs, "\n") > 2 {
					t.Errorf("forkfuzz %s: exit %d, want 2 and at most two lines naming --%s\nstdout: %.300s\nstderr: %.300s", strings.Join(args, " "), code, m[1], out, errs)
				}
				checked++
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d numeric flags found in the usages", checked)
	}
	t.Logf("%d numeric flags checked", checked)
}
