package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
)

// replayFindings runs the replay command of every finding under
// workdir/findings as its report.txt writes it (in-process, in the
// finding's directory) and expects exit 1 with the same signature. It
// returns how many findings it replayed.
func replayFindings(t *testing.T, workdir string) int {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(workdir, "findings", "*"))
	n := 0
	for _, d := range dirs {
		rep, err := os.ReadFile(filepath.Join(d, "report.txt"))
		if err != nil {
			t.Fatal(err)
		}
		sig, _ := os.ReadFile(filepath.Join(d, "signature"))
		var line string
		for _, l := range strings.Split(string(rep), "\n") {
			if strings.HasPrefix(l, "replay:") {
				line = strings.TrimSpace(strings.TrimPrefix(l, "replay:"))
			}
		}
		if line == "" {
			t.Fatalf("%s: report has no replay line:\n%s", d, rep)
		}
		for _, want := range []string{"kernel:", "version:  forkfuzz"} {
			if !strings.Contains(string(rep), want) {
				t.Errorf("%s: report lacks %q", d, want)
			}
		}
		if file, _ := os.ReadFile(filepath.Join(d, "replay")); strings.TrimSpace(string(file)) != line {
			t.Errorf("%s: replay file %q differs from the report's %q", d, file, line)
		}
		args := campaign.SplitCommand(line)
		if len(args) < 3 || args[0] != "forkfuzz" || args[1] != "exec" {
			t.Fatalf("%s: replay %q is not a forkfuzz exec command", d, line)
		}
		args = args[1:]
		args[len(args)-1] = filepath.Join(d, args[len(args)-1]) // run "in this directory"
		code, out, errs := forkfuzz(t, args...)
		want := strings.TrimSpace(string(sig))
		if code != exitFindings || !strings.Contains(out, "] "+want+"\n") {
			t.Errorf("%s: replay %q: exit %d, want 1 with %s\nstdout: %s\nstderr: %s", d, line, code, want, out, errs)
		}
		n++
	}
	return n
}

// TestSimFindingsReplayAsWritten: the findings of a simulated-kernel
// campaign with a mutant, failure injection and a scheduler seed replay
// with the command their report shows.
func TestSimFindingsReplayAsWritten(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "run", "-q", "--target", "sim", "--fork", "async", "--mutant", "async-kill-norecover",
		"--sched-seed", "7", "--fail-rate", "0.5", "--programs", "200", "--seed", "3", "--workdir", dir, "--minimize-runs", "100")
	if code != exitFindings {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	n := replayFindings(t, dir)
	if n == 0 {
		t.Fatalf("no findings:\n%s", out)
	}
	rep, _ := os.ReadFile(filepath.Join(firstFinding(t, dir), "report.txt"))
	for _, want := range []string{"--target sim", "--fork async", "--mutant async-kill-norecover", "--sched-seed 7", "--fail-rate 0.5"} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("replay lacks %q:\n%s", want, rep)
		}
	}
	t.Logf("%d findings replayed", n)
}

func firstFinding(t *testing.T, workdir string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(workdir, "findings", "*"))
	if len(dirs) == 0 {
		t.Fatal("no finding")
	}
	return dirs[0]
}

// TestReusedWorkdirStillFails: the second run of the same failing
// campaign in the same workdir finds nothing new but must still fail, and
// say which earlier findings it saw again.
func TestReusedWorkdirStillFails(t *testing.T) {
	dir := t.TempDir()
	args := []string{"run", "-q", "--target", "sim", "--fork", "eager", "--mutant", "eager-no-wrprotect",
		"--programs", "40", "--seed", "5", "--workdir", dir, "--minimize-runs", "50"}
	code, out, errs := forkfuzz(t, args...)
	if code != exitFindings {
		t.Fatalf("first run: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	saved := strings.Count(out, "\nfinding: ")
	code, out, errs = forkfuzz(t, args...)
	if code != exitFindings {
		t.Fatalf("second run: exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// The second run restores the first's corpus, so its mutated
	// programs differ and may find something new too; what matters is
	// that the findings it saw again are reported, not dropped.
	if m := regexp.MustCompile(` (\d+) known from earlier runs in this workdir`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Fatalf("second run's summary does not say the findings were known:\n%s", out)
	}
	if got := strings.Count(out, "\nknown finding: "); got == 0 || got > saved {
		t.Fatalf("second run lists %d known findings (first run saved %d):\n%s", got, saved, out)
	}
}

// TestBadInput runs every bad input a new user tried and expects exit 2
// with one line on stderr naming what is wrong.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	obs77 := write("obs77.json", `{"version": 1, "ops": [{"ran": true}, {"ran": true}, {"ran": true}],
 "views": [{"proc": 0, "at": -2, "words": [{"region": 77, "off": 0, "value": 1}]}]}`)
	noViews := write("noviews.json", `{"version": 1, "ops": [{"ran": true}, {"ran": true}, {"ran": true}], "views": []}`)
	small := write("small.ffz", "forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nf0: store r0 off=0x0 count=1\nwait f0\n")
	huge := write("huge.ffz", "forkfuzz v1\nregion r0 anon-private pages=1\nfork "+strings.Repeat("x", 1<<20)+"\n")
	big := filepath.Join(dir, "big.ffz")
	if f, err := os.Create(big); err == nil {
		f.WriteString("forkfuzz v1\n")
		f.Truncate(20 << 20)
		f.Close()
	}
	joinNever := write("join.ffz", "forkfuzz v1\nregion r0 anon-private pages=1\njoin t3\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--programs", "10", "extra", "--workdir", filepath.Join(dir, "out")}, `unexpected argument "extra"`},
		{[]string{"run", "--duration", "-1s"}, "--duration -1s"},
		{[]string{"run", "--programs", "-5", "--duration", "0"}, "--programs -5"},
		{[]string{"run", "--duration", "0", "--programs", "0"}, "set --duration or --programs"},
		{[]string{"run", "--target", "sim", "--duration", "1ns", "--workdir", filepath.Join(dir, "w1")}, "no program ran"},
		{[]string{"run", "--target", "qemu", "--vms", "0", "--programs", "1"}, "--vms 0"},
		{[]string{"run", "--target", "sim", "--fail-rate", "2.5", "--programs", "1"}, "--fail-rate 2.5"},
		{[]string{"run", "--target", "sim", "--fail-nth", "-3", "--programs", "1"}, "--fail-nth -3"},
		{[]string{"run", "--minimize-runs", "-1", "--programs", "1"}, "--minimize-runs -1"},
		{[]string{"gen", "-n", "-5"}, "-n -5"},
		{[]string{"sim-bench", "--budget", "-1s"}, "--budget -1s"},
		{[]string{"run", "--target", "native", "--mutant", "X", "--programs", "1"}, "--mutant is a flag of --target sim"},
		{[]string{"exec", "--target", "native", "--fork", "async", "testdata/clean.ffz"}, "--fork is a flag of --target sim"},
		{[]string{"run", "--corrupt", "nope", "--programs", "1"}, `unknown corruption "nope"`},
		{[]string{"run", "--target", "sim", "--corrupt", "child-misses-write", "--programs", "1"}, "no executor"},
		{[]string{"check", small, obs77}, "observation invalid: field views[0]: words[0]: region 77"},
		{[]string{"check", small, noViews}, "observation invalid: field views: empty"},
		{[]string{"exec", huge}, `(1048576 bytes)`},
		{[]string{"exec", big}, "larger than 16 MiB"},
		{[]string{"exec", joinNever}, "join t3"},
		{[]string{"kernel", "check", "/bin/ls"}, "not a kernel image"},
		{[]string{"run", "--target", "qemu", "--kernel", filepath.Join(dir, "no-such-bzImage"), "--programs", "1"}, "no-such-bzImage"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
		{[]string{"exec", "testdata/clean.ffz", "--target", "sim"}, `unexpected argument "--target" (flags go before PROG)`},
	} {
		code, out, errs := forkfuzz(t, c.args...)
		lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
		if code != exitError || !strings.Contains(errs, c.want) || len(lines) != 1 || len(errs) > 400 {
			t.Errorf("forkfuzz %s: exit %d, want 2 and one line with %q\nstderr (%d bytes): %.400s\nstdout: %.400s",
				strings.Join(c.args, " "), code, c.want, len(errs), errs, out)
		}
		if strings.Contains(out, "booting") || strings.Contains(errs, "booting") {
			t.Errorf("forkfuzz %s: announced a boot", strings.Join(c.args, " "))
		}
	}
	if _, err := os.Stat(filepath.Join(".", "workdir")); err == nil {
		t.Errorf("a run wrote ./workdir")
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"run", "-h"}, {"exec", "--help"}, {"run", "--target", "sim", "-h"}, {"kernel", "-h"}, {"kernel", "check", "-h"}, {"version", "-h"}} {
		if code, _, _ := forkfuzz(t, args...); code != exitClean {
			t.Errorf("forkfuzz %s: exit %d, want 0", strings.Join(args, " "), code)
		}
	}
}

// TestRunSIGTERM: a campaign ended by SIGTERM (what a CI job timeout
// sends) stops early, prints its summary and exits by what it saw; the
// progress output into a non-terminal carries no carriage returns.
func TestRunSIGTERM(t *testing.T) {
	dir := t.TempDir()
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		code, out, errs := forkfuzz(t, "run", "--target", "sim", "--duration", "2m", "--seed", "1", "--workdir", dir)
		done <- result{code, out, errs}
	}()
	// The workdir's findings directory appears after the signal handler
	// is installed.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "findings")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the campaign did not start")
		}
	}
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("SIGTERM did not end the campaign")
	}
	if r.code != exitClean || !strings.Contains(r.out, "summary: ") || !strings.Contains(r.out, "interrupted: ") {
		t.Fatalf("exit %d after %v\nstdout: %s\nstderr: %s", r.code, time.Since(start), r.out, r.errs)
	}
	if strings.Contains(r.errs, "\r") {
		t.Errorf("progress into a non-terminal uses carriage returns: %q", r.errs)
	}
}

// TestHarnessErrorsAfterFindings: a campaign that gives up on harness
// errors exits 2 but still lists the findings it saved before, and says
// both. (The test-only corruption child-misses-write is a harness error
// on a program whose children saw no private word: seed 1 finds two
// things in programs 0 and 1, then program 2 cannot be corrupted.)
func TestHarnessErrorsAfterFindings(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "run", "-q", "--corrupt", "child-misses-write", "--programs", "12", "--seed", "1",
		"--workdir", dir, "--minimize-runs", "5", "--max-harness-errors", "1")
	if code != exitError || !strings.Contains(errs, "harness errors in a row") || !strings.Contains(errs, "failing runs: ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if n := strings.Count(out, "\nfinding: "); n == 0 {
		t.Fatalf("no finding listed:\n%s", out)
	}
}
