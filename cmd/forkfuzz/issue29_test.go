package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIssue29Cases: the bad or awkward inputs of issue 29 in one table,
// each with the exit status and a line the command must print (on stdout
// or stderr; "$D" is the test's directory). Runs on the simulated target
// (the two gates take the shortest budget, 5 s each); the help, version
// and numeric-flag cases of every command are TestConventions,
// TestEveryCommandHelp and TestNumericFlagsChecked, the gate's behaviour
// TestCIBadInput and TestCIGate*.
func TestIssue29Cases(t *testing.T) {
	d := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("all.txt", "* reason=everything\n")
	write("panics.txt", "kernel-* reason=all panics\n")
	write("scoped.txt", "* target=sim-eager reason=a scoped entry\n")
	prog, err := os.ReadFile("testdata/clean.ffz")
	if err != nil {
		t.Fatal(err)
	}
	// A persistent CI workspace holding an earlier run's finding.
	write("old/findings/x/signature", "memory:lost-store:anon-private\n")
	write("old/findings/x/program.ffz", string(prog))
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Another process holding a workdir's lock.
	busy := filepath.Join(d, "busy")
	os.MkdirAll(busy, 0o755)
	holder := exec.Command("flock", filepath.Join(busy, ".lock"), "sleep", "60")
	if err := holder.Start(); err != nil {
		t.Logf("no flock(1): the lock case is skipped: %v", err)
		holder = nil
	} else {
		defer holder.Process.Kill()
		time.Sleep(300 * time.Millisecond)
	}
	gate := []string{"ci", "--target", "sim", "--budget", "5s", "-q", "--json", filepath.Join(d, "ci.json"), "--junit", filepath.Join(d, "ci.xml")}
	for _, c := range []struct {
		args []string
		code int
		line string
	}{
		// Known issues: an entry waiving everything or a whole class is
		// refused unscoped, taken with a warning when scoped.
		{[]string{"ci", "--target", "sim", "--known-issues", "$D/all.txt"}, exitError, `forkfuzz ci: --known-issues: $D/all.txt:1:pattern: "*" waives every finding`},
		{[]string{"ci", "--target", "sim", "--known-issues", "$D/panics.txt"}, exitError, `$D/panics.txt:1:pattern: "kernel-*"`},
		{append(gate, "--workdir", "$D/w1", "--known-issues", "$D/scoped.txt"), exitClean, `ci: warning: $D/scoped.txt:1: known issue "*" waives every finding on release "*", target "sim-eager"`},
		// A workdir with an earlier run's findings: moved aside, not judged.
		{append(gate, "--workdir", "$D/old"), exitClean, "ci: warning: the workdir held an earlier run's findings: moved to $D/old/earlier/findings-"},
		// The workdir lock.
		{[]string{"run", "--target", "sim", "--programs", "1", "--workdir", "$D/busy"}, exitError, "forkfuzz run: workdir $D/busy is in use by "},
		// The latency gate cannot be switched off by a negative ratio.
		{[]string{"bench", "fork", "--max-ratio", "-1"}, exitError, "forkfuzz bench fork: --max-ratio -1: want a number >= 0 (0: no gate)"},
		// Conventions.
		{[]string{"ci", "-h"}, exitClean, "usage: forkfuzz ci [flags]"},
		{[]string{"coordinator", "-h"}, exitClean, "usage: forkfuzz coordinator [flags]"},
		{[]string{"--version"}, exitClean, "forkfuzz "},
		{[]string{"rnu"}, exitError, `forkfuzz: unknown command "rnu" (did you mean run?)`},
		{[]string{"bench", "fork", "--reps", "2", "extra", "--csv", "$D/out.csv"}, exitError, `forkfuzz bench fork: unexpected argument "extra" (bench fork takes flags only)`},
		{[]string{"redis", "extra", "--svg", "$D/out.svg"}, exitError, `forkfuzz redis: unexpected argument "extra" (redis takes flags only)`},
		{[]string{"ci", "--target", "sim", "extra"}, exitError, `unexpected argument "extra"`},
		{[]string{"run", "--bogus"}, exitError, "forkfuzz run: 'forkfuzz run -h' lists the flags"},
		{[]string{"run", "--duration", "-1s"}, exitError, "forkfuzz run: --duration -1s: want a duration >= 0 (0: no time limit; --programs must then bound the campaign)"},
		{[]string{"ci", "--target", "sim", "--budget", "-1s"}, exitError, "--budget must be positive"},
		// Kernel releases are checked, not guessed.
		{[]string{"repro-c", "--kernel", "garbage", "testdata/clean.ffz"}, exitError, `"garbage" is not a kernel release`},
		{[]string{"modelcmp", "--model-kernel", "garbage"}, exitError, `"garbage" is not a kernel release`},
		// Unbounded reads: a FIFO where a file is expected is refused.
		{[]string{"kernel", "check", "$D/fifo"}, exitError, "forkfuzz kernel check: $D/fifo is a FIFO, want a regular file"},
		{[]string{"run", "--target", "qemu", "--target-file", "$D/fifo", "--programs", "1"}, exitError, "forkfuzz run: $D/fifo is a FIFO, want a regular file"},
		{[]string{"worker", "--config", "$D/fifo"}, exitError, "forkfuzz worker: config: $D/fifo is a FIFO, want a regular file"},
		{[]string{"coordinator", "--config", "$D/fifo"}, exitError, "forkfuzz coordinator: config: $D/fifo is a FIFO, want a regular file"},
		// Distributed commands check their flags up front.
		{[]string{"coordinator", "--target", "nope"}, exitError, `forkfuzz coordinator: --target "nope": want one of native, qemu, sim (no worker could run it: the coordinator would wait for ever)`},
		{[]string{"worker", "--vms", "0", "--coordinator", "http://127.0.0.1:1"}, exitError, "forkfuzz worker: --vms 0: want a number > 0"},
	} {
		if holder == nil && strings.Contains(strings.Join(c.args, " "), "$D/busy") {
			continue
		}
		args := make([]string, len(c.args))
		for i, a := range c.args {
			args[i] = strings.ReplaceAll(a, "$D", d)
		}
		line := strings.ReplaceAll(c.line, "$D", d)
		code, out, errs := forkfuzz(t, args...)
		if code != c.code || !hasLinePrefix(out, line) && !hasLinePrefix(errs, line) && !strings.Contains(errs, line) {
			t.Errorf("forkfuzz %s: exit %d, want %d and the line\n\t%s\nstdout: %.800s\nstderr: %.600s", strings.Join(args, " "), code, c.code, line, out, errs)
		}
	}
}

// hasLinePrefix reports whether a line of text starts with prefix.
func hasLinePrefix(text, prefix string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
