package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestMain lets the test binary serve as its own executor process (the
// native target starts os.Executable() with the "executor" argument) and
// porcupine worker.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "executor" {
		executor.Serve()
	}
	if len(os.Args) > 1 && os.Args[1] == "bench-worker" {
		os.Exit(cmdBenchWorker(nil, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "porcupine-worker" {
		os.Exit(cmdPorcupineWorker(nil, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func forkfuzz(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExecClean(t *testing.T) {
	code, out, errs := forkfuzz(t, "exec", "testdata/clean.ffz")
	if code != exitClean || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

func TestExecCorruptionIsCaught(t *testing.T) {
	code, out, errs := forkfuzz(t, "exec", "--corrupt", "child-sees-parent-write", "testdata/clean.ffz")
	if code != exitFindings || !strings.Contains(out, "isolation") || !strings.Contains(out, "f0") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

func TestBadProgramNamesLineAndColumn(t *testing.T) {
	code, _, errs := forkfuzz(t, "exec", "testdata/bad.ffz")
	if code != exitError || !strings.Contains(errs, "testdata/bad.ffz:3:16: unknown argument \"colour\"") {
		t.Fatalf("exit %d, stderr: %s", code, errs)
	}
}

func TestCheckRejudgesAndNamesBadFields(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "exec", "--json", "testdata/clean.ffz")
	if code != exitClean {
		t.Fatalf("exec --json: exit %d: %s", code, errs)
	}
	// Keep only the observation member.
	i := strings.Index(out, `"observation": `)
	j := strings.LastIndex(out, `,
 "issues"`)
	if i < 0 || j < 0 {
		t.Fatalf("unexpected exec --json output: %s", out)
	}
	obsPath := filepath.Join(dir, "obs.json")
	os.WriteFile(obsPath, []byte(out[i+len(`"observation": `):j]), 0o644)
	if code, out, errs := forkfuzz(t, "check", "testdata/clean.ffz", obsPath); code != exitClean {
		t.Fatalf("check: exit %d: %s %s", code, out, errs)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\"version\": 1,\n \"ops\": \"nope\"}"), 0o644)
	code, _, errs = forkfuzz(t, "check", "testdata/clean.ffz", bad)
	if code != exitError || !strings.Contains(errs, "bad.json:2:") || !strings.Contains(errs, "field ops") {
		t.Fatalf("bad observation: exit %d: %s", code, errs)
	}
}

func TestRunShortCampaignIsClean(t *testing.T) {
	n := "40"
	if testing.Short() {
		n = "8"
	}
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "run", "-q", "--programs", n, "--seed", "7", "--workdir", dir)
	if code != exitClean || !strings.Contains(out, "summary: "+n+" programs") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// TestRunWithCorruptionSavesMinimizedFinding is the self-test: the executor
// falsifies one child's view; the campaign must flag it, explain it, and
// minimize the program to a handful of operations.
func TestRunWithCorruptionSavesMinimizedFinding(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "run", "-q", "--programs", "30", "--seed", "3", "--workdir", dir,
		"--corrupt", "child-sees-parent-write", "--minimize-runs", "150")
	if code != exitFindings {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	dirs, _ := filepath.Glob(filepath.Join(dir, "findings", "*"))
	if len(dirs) == 0 {
		t.Fatalf("no finding saved:\n%s", out)
	}
	found := false
	for _, d := range dirs {
		sig, _ := os.ReadFile(filepath.Join(d, "signature"))
		if !strings.HasPrefix(string(sig), "isolation") {
			continue
		}
		found = true
		min, err := os.ReadFile(filepath.Join(d, "minimized.ffz"))
		if err != nil {
			t.Fatal(err)
		}
		ops := 0
		for _, l := range strings.Split(string(min), "\n") {
			if l != "" && !strings.HasPrefix(l, "forkfuzz") && !strings.HasPrefix(l, "region") {
				ops++
			}
		}
		if ops > 5 {
			t.Errorf("minimized program has %d ops:\n%s", ops, min)
		}
		rep, _ := os.ReadFile(filepath.Join(d, "report.txt"))
		for _, want := range []string{"f0", "expected", "actual", "after fork f0", "reproduced 5/5"} {
			if !strings.Contains(string(rep), want) {
				t.Errorf("report lacks %q:\n%s", want, rep)
			}
		}
		if testing.Verbose() {
			t.Logf("%s", rep)
		}
	}
	if !found {
		t.Fatalf("no isolation finding among %v", dirs)
	}
	// Every finding replays, as its report writes the command, with the
	// corruption it was found under.
	if n := replayFindings(t, dir); n != len(dirs) {
		t.Fatalf("replayed %d of %d findings", n, len(dirs))
	}
	rep, _ := os.ReadFile(filepath.Join(dirs[0], "report.txt"))
	if !strings.Contains(string(rep), "--corrupt child-sees-parent-write") || !strings.Contains(string(rep), "kernel:   uname ") {
		t.Errorf("report lacks the corruption in its replay or the host kernel:\n%s", rep)
	}
}

func TestUsageAndUnknown(t *testing.T) {
	if code, _, _ := forkfuzz(t, "bogus"); code != exitError {
		t.Fatal("unknown command accepted")
	}
	if code, _, errs := forkfuzz(t, "run", "--target", "mars", "--programs", "1"); code != exitError || !strings.Contains(errs, "unknown target \"mars\"") {
		t.Fatalf("unknown target: %d %s", code, errs)
	}
	if code, out, _ := forkfuzz(t, "help"); code != exitClean || !strings.Contains(out, "minimize") {
		t.Fatal("help")
	}
}

// TestMinimizeSignatureNotShown: with --signature, a program that does
// not show it gets three runs (a race may need them), then a clear error;
// without --signature a clean program has nothing to minimize.
func TestMinimizeSignatureNotShown(t *testing.T) {
	code, _, errs := forkfuzz(t, "minimize", "--target", "sim", "--signature", "memory:lost-store", "testdata/clean.ffz")
	if code != exitError || !strings.Contains(errs, "did not show memory:lost-store in 3 runs") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	code, _, errs = forkfuzz(t, "minimize", "--target", "sim", "testdata/clean.ffz")
	if code != exitClean || !strings.Contains(errs, "nothing to minimize") {
		t.Fatalf("no signature: exit %d, stderr %q", code, errs)
	}
}

// pendingTarget is a target that saw a kernel event while it was opened.
type pendingTarget struct {
	agents.Target
	pending []agents.Pending
}

func (p *pendingTarget) TakePending() []agents.Pending {
	out := p.pending
	p.pending = nil
	return out
}

// A kernel BUG seen by the --fork-impl calibration, before PROG ran, is a
// finding of exec (exit 1), not lost behind PROG's own clean verdict.
func TestExecPendingIsAFinding(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	kr := &vm.KernelReportError{Title: "kernel BUG at include/linux/mm.h:1616", Kind: "bug", Report: "kernel BUG at include/linux/mm.h:1616!", Console: "console"}
	tg := &pendingTarget{pending: []agents.Pending{{Program: p, Err: kr, Note: "fork-implementation calibration, run 1"}}}
	var out strings.Builder
	if n := pendingIssues(tg, &out); n != 1 || !strings.Contains(out.String(), "FAIL [kernel-bug]") || !strings.Contains(out.String(), "calibration, run 1") {
		t.Fatalf("pendingIssues = %d:\n%s", n, out.String())
	}
	if n := pendingIssues(tg, &out); n != 0 {
		t.Errorf("the events were taken twice: %d", n)
	}
	if n := pendingIssues(&pendingTarget{}, &out); n != 0 {
		t.Errorf("no events: %d", n)
	}
}

// A regression file may hold several programs (fork-inheritance.ffz): the
// gate names them FILE#N, and exec and repro-c take that name. Without
// it such a file was a parse error at its first "====" line.
func TestExecNamedProgramOfFile(t *testing.T) {
	const file = "../../corpus/regress/fork-inheritance.ffz"
	code, _, errs := forkfuzz(t, "exec", "--target", "sim", file)
	if code != exitError || !strings.Contains(errs, "holds 7 programs") || !strings.Contains(errs, file+"#7") {
		t.Fatalf("a file of several programs: exit %d, stderr: %s", code, errs)
	}
	code, out, errs := forkfuzz(t, "exec", "--target", "sim", file+"#2")
	if code != exitClean || !strings.Contains(out, "ok") {
		t.Fatalf("%s#2: exit %d\nstdout: %s\nstderr: %s", file, code, out, errs)
	}
	code, out, errs = forkfuzz(t, "repro-c", file+"#3")
	if code != exitClean || !strings.Contains(out, "forkfuzz C reproducer") {
		t.Fatalf("repro-c %s#3: exit %d, stderr: %s", file, code, errs)
	}
	if code, _, errs = forkfuzz(t, "exec", "--target", "sim", file+"#8"); code != exitError || !strings.Contains(errs, "holds 7 program(s)") {
		t.Fatalf("%s#8: exit %d, stderr: %s", file, code, errs)
	}
}
