package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign/gate"
)

// The test binary serves as the forkfuzz CLI when FORKFUZZ_CLI_MAIN is
// set (the SIGTERM test runs it as a subprocess).
func init() {
	if os.Getenv("FORKFUZZ_CLI_MAIN") == "1" && len(os.Args) > 1 && os.Args[1] != "executor" && os.Args[1] != "porcupine-worker" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// mutantArgs make the simulated Async-fork kernel with a rollback bug the
// kernel under test.
var mutantArgs = []string{"--target", "sim", "--fork", "async", "--mutant", "async-rollback-partial", "--fail-rate", "0.5",
	"--corpus", "../../corpus/regress", "--corpus", "../../corpus/rollback", "-q"}

type ciRun struct {
	code             int
	stdout, stderr   string
	res              gate.Result
	raw              map[string]any
	junit, jsonBytes []byte
	elapsed          time.Duration
}

func runCI(t *testing.T, args ...string) *ciRun {
	t.Helper()
	dir := gateDir(t)
	jx, jj := filepath.Join(dir, "results.xml"), filepath.Join(dir, "results.json")
	all := append([]string{"ci", "--junit", jx, "--json", jj, "--workdir", filepath.Join(dir, "w")}, args...)
	t0 := time.Now()
	code, out, errs := forkfuzz(t, all...)
	r := &ciRun{code: code, stdout: out, stderr: errs, elapsed: time.Since(t0)}
	t.Logf("forkfuzz %s: exit %d in %v\n%s", strings.Join(all, " "), code, r.elapsed.Round(time.Millisecond), lastLines(out, 12))
	readResults(t, r, jx, jj)
	return r
}

// gateDir is a temporary directory for a gate run in this process. A gate
// that reaches its hard stop abandons the campaign goroutine (the CLI
// then exits, which ends it); here it lives on and may still write a
// finding's files for a while, so removal is retried.
func gateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "forkfuzz-ci-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(time.Minute)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("removing %s: %v", dir, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	return dir
}

func readResults(t *testing.T, r *ciRun, jx, jj string) {
	t.Helper()
	var err error
	if r.junit, err = os.ReadFile(jx); err != nil {
		t.Fatalf("no JUnit file: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	if err := gate.ValidateJUnit(r.junit); err != nil {
		t.Fatalf("JUnit does not validate: %v", err)
	}
	if r.jsonBytes, err = os.ReadFile(jj); err != nil {
		t.Fatalf("no JSON file: %v", err)
	}
	if err := json.Unmarshal(r.jsonBytes, &r.res); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.jsonBytes, &r.raw); err != nil {
		t.Fatal(err)
	}
	if r.res.Schema != "forkfuzz-ci" || r.res.SchemaVersion != gate.SchemaVersion || r.res.ExitCode != r.code && r.code != -1 {
		t.Fatalf("JSON: schema %q v%d, exit_code %d (process %d)", r.res.Schema, r.res.SchemaVersion, r.res.ExitCode, r.code)
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestCIGateFailsMutant: the mutant as the kernel under test, the
// unmodified model as baseline: exit 1, JUnit and JSON name the finding,
// its replay command reproduces it, and a 20 s budget ends within the
// budget plus 3 s.
func TestCIGateFailsMutant(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 20 s gate")
	}
	const budget, margin = 20 * time.Second, 3 * time.Second
	r := runCI(t, append([]string{"--budget", budget.String(), "--baseline-mutant", "none"}, mutantArgs...)...)
	if r.code != exitFindings || r.res.Outcome != "fail" {
		t.Fatalf("exit %d, outcome %q, want 1/fail\n%s", r.code, r.res.Outcome, r.stderr)
	}
	if r.elapsed > budget+margin {
		t.Errorf("the gate took %v, budget %v + margin %v", r.elapsed, budget, margin)
	}
	const sig = "pagetable:pmd-rw-not-restored"
	var f *gate.FindingRecord
	for i := range r.res.Findings {
		if r.res.Findings[i].Signature == sig {
			f = &r.res.Findings[i]
		}
	}
	if f == nil || f.Status != gate.StatusNew || f.Baseline == nil || f.Baseline.Runs != 3 || f.Baseline.Reproduced != 0 {
		t.Fatalf("finding %s: %+v", sig, f)
	}
	if r.res.Counts.NewGroups < 1 || r.res.Counts.Groups > r.res.Counts.Findings || len(r.res.Groups) != r.res.Counts.Groups {
		t.Fatalf("counts %+v, %d groups", r.res.Counts, len(r.res.Groups))
	}
	if r.res.Programs < 100 || r.res.CorpusPrograms == 0 || r.res.Forks == 0 {
		t.Fatalf("programs %d (corpus %d), forks %d", r.res.Programs, r.res.CorpusPrograms, r.res.Forks)
	}
	var phases []string
	for _, p := range r.res.Phases {
		phases = append(phases, p.Name)
	}
	if got := strings.Join(phases, ","); got != "identify,check,boot,replay,fuzz,confirm,baseline,fresh,collect,report" {
		t.Fatalf("phases %s", got)
	}
	if !strings.Contains(string(r.junit), `<failure message="`) || !strings.Contains(string(r.junit), sig) || !strings.Contains(string(r.junit), "replay: forkfuzz exec") {
		t.Fatal("the JUnit output names no failing finding with its replay command")
	}
	if !strings.Contains(r.stdout, "ci: FAIL (exit 1)") {
		t.Fatal("no summary line")
	}
	// The replay command is complete: run as written, it reproduces.
	args := strings.Fields(f.Replay)
	if args[0] != "forkfuzz" || !strings.Contains(f.Replay, "--mutant async-rollback-partial") || !strings.Contains(f.Replay, "--fail-rate 0.5") {
		t.Fatalf("replay command %q", f.Replay)
	}
	code, out, _ := forkfuzz(t, args[1:]...)
	if code != exitFindings || !strings.Contains(out, sig) {
		t.Fatalf("replay %q: exit %d\n%s", f.Replay, code, out)
	}
	// And on the baseline it passes.
	code, out, _ = forkfuzz(t, strings.Fields(f.Baseline.Command)[1:]...)
	if code != exitClean {
		t.Fatalf("baseline replay %q: exit %d\n%s", f.Baseline.Command, code, out)
	}

	// A later gate replays these findings with the corpus: they fail on
	// the mutant and pass on the unmodified model.
	for _, mutant := range []bool{true, false} {
		// Replaying a failing program costs up to 1.5 s (judging, saving
		// the finding) and the replay share is a quarter of the budget:
		// on the mutant, the share ends before every finding replayed.
		args := []string{"--budget", "10s", "--replay-findings", r.res.Workdir, "--target", "sim", "--fork", "async", "--fail-rate", "0.5", "-q"}
		if mutant {
			args = append(args, "--mutant", "async-rollback-partial")
		}
		r2 := runCI(t, args...)
		n, ran := 0, 0
		for _, c := range r2.res.Corpus {
			if c.Source != "finding" {
				continue
			}
			n++
			if c.Status == "skipped" && mutant {
				continue
			}
			ran++
			if want := map[bool]string{true: "fail", false: "pass"}[mutant]; c.Status != want {
				t.Errorf("mutant %v: replayed finding %s: %s, want %s", mutant, c.Name, c.Status, want)
			}
		}
		if n != len(r.res.Findings) || ran < 3 {
			t.Errorf("mutant %v: %d earlier findings listed (%d ran), want %d", mutant, n, ran, len(r.res.Findings))
		}
		if mutant && r2.code != exitFindings {
			t.Errorf("the mutant with its own earlier findings replayed: exit %d, want 1", r2.code)
		}
	}
}

// TestCIGatePreexisting: the mutant as its own baseline: every finding is
// pre-existing, exit 0.
func TestCIGatePreexisting(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	out := t.TempDir()
	kcidb, ktap, table := filepath.Join(out, "kcidb.json"), filepath.Join(out, "ktap.txt"), filepath.Join(out, "table.md")
	r := runCI(t, append([]string{"--budget", "10s", "--baseline-mutant", "async-rollback-partial",
		"--kcidb", kcidb, "--kcidb-run-id", "job-42", "--ktap", ktap, "--baseline-table", table}, mutantArgs...)...)
	if r.code != exitClean || r.res.Outcome != "pass" {
		t.Fatalf("exit %d (%s), want 0\n%s", r.code, r.res.Reason, r.stdout)
	}
	// The formats kernel CI reads (their writers are tested against the
	// KCIDB schema and a KTAP parser in campaign/gate): written, and
	// saying what the gate saw.
	var sub struct {
		Version struct{ Major int } `json:"version"`
		Tests   []struct {
			ID, Path, Status string
		} `json:"tests"`
	}
	b, err := os.ReadFile(kcidb)
	if err != nil || json.Unmarshal(b, &sub) != nil || sub.Version.Major != 5 || len(sub.Tests) == 0 || !strings.HasPrefix(sub.Tests[0].ID, "forkfuzz:") {
		t.Fatalf("KCIDB submission: %v\n%.400s", err, b)
	}
	if b, err := os.ReadFile(ktap); err != nil || !strings.HasPrefix(string(b), "KTAP version 1\n") {
		t.Fatalf("KTAP: %v\n%.200s", err, b)
	}
	if b, err := os.ReadFile(table); err != nil || !strings.Contains(string(b), "| signature |") || !strings.Contains(r.stdout, "| signature |") {
		t.Fatalf("baseline table (file and stdout): %v\n%s", err, b)
	}
	c := r.res.Counts
	if c.Findings == 0 || c.Preexisting != c.Findings || c.PreexistingGroups != c.Groups || c.New != 0 {
		t.Fatalf("counts %+v", c)
	}
	for _, f := range r.res.Findings {
		if f.Status != gate.StatusPreexisting || f.Baseline.Reproduced == 0 {
			t.Fatalf("finding %s: %s (%s)", f.Signature, f.Status, f.StatusReason)
		}
	}
	if strings.Contains(string(r.junit), "<failure") {
		t.Fatal("pre-existing findings fail the JUnit report")
	}
}

// TestCIGateKnownIssues: a known-issues entry for the mutant's target
// makes the gate pass; an expired one warns and no longer matches.
func TestCIGateKnownIssues(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	known := filepath.Join(dir, "known.txt")
	os.WriteFile(known, []byte("# the rollback mutant's findings are accepted\n"+
		"* target=sim-async+async-rollback-partial reason=injected rollback bug, tracked elsewhere\n"+
		"snapshot:* target=sim* expires=2020-01-01 reason=an old entry\n"), 0o644)
	r := runCI(t, append([]string{"--budget", "10s", "--known-issues", known}, mutantArgs...)...)
	if r.code != exitClean {
		t.Fatalf("exit %d (%s), want 0", r.code, r.res.Reason)
	}
	c := r.res.Counts
	if c.Findings == 0 || c.Known != c.Findings || c.KnownGroups != c.Groups {
		t.Fatalf("counts %+v", c)
	}
	if r.res.Findings[0].KnownIssue != known+":2" {
		t.Fatalf("known issue %q", r.res.Findings[0].KnownIssue)
	}
	expired := false
	for _, w := range r.res.Warnings {
		expired = expired || strings.Contains(w, known+":3") && strings.Contains(w, "expired")
	}
	if !expired {
		t.Fatalf("no warning about the expired entry: %q", r.res.Warnings)
	}
	// An entry that waives every finding, scoped to a target, is taken
	// with a loud warning (unscoped it is refused: TestCIBadInput).
	broad := false
	for _, w := range r.res.Warnings {
		broad = broad || strings.Contains(w, known+":2") && strings.Contains(w, "waives every finding")
	}
	if !broad {
		t.Fatalf("no warning about the entry that waives every finding: %q", r.res.Warnings)
	}

	// The same entry for another target does not match: exit 1.
	os.WriteFile(known, []byte("* target=qemu reason=other target\n"), 0o644)
	r = runCI(t, append([]string{"--budget", "6s", "--known-issues", known}, mutantArgs...)...)
	if r.code != exitFindings {
		t.Fatalf("exit %d with a non-matching known issue, want 1", r.code)
	}
}

// TestCIGateMinPrograms: fewer programs than --min-programs is exit 2,
// also without findings (the unmodified model).
func TestCIGateMinPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	r := runCI(t, "--target", "sim", "--fork", "async", "--budget", "5s", "--min-programs", "100000000", "-q")
	if r.code != exitError || !strings.Contains(r.res.Reason, "--min-programs") {
		t.Fatalf("exit %d (%s), want 2 for too few programs", r.code, r.res.Reason)
	}
	if r.res.Programs == 0 || !strings.Contains(string(r.junit), `type="min-programs"`) {
		t.Fatalf("%d programs; JUnit lacks the min-programs error", r.res.Programs)
	}
}

// TestCIGateSIGTERM: SIGTERM (what CI job timeouts send) ends the gate
// with the files written and the summary printed.
func TestCIGateSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jx, jj := filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.json")
	args := append([]string{"ci", "--budget", "10m", "--junit", jx, "--json", jj, "--workdir", filepath.Join(dir, "w")}, mutantArgs...)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "FORKFUZZ_CLI_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	fuzzing := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		started := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !started && strings.Contains(sc.Text(), "ci: phase fuzz") {
				started = true
				close(fuzzing)
			}
		}
	}()
	select {
	case <-fuzzing:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the gate did not reach fuzzing in 60 s\n%s", out.String())
	}
	time.Sleep(2 * time.Second)
	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	err = cmd.Wait()
	took := time.Since(t0)
	code := cmd.ProcessState.ExitCode()
	t.Logf("exit %d %v %v after SIGTERM\n%s", code, err, took.Round(time.Millisecond), lastLines(out.String(), 8))
	if took > 10*time.Second {
		t.Errorf("the gate took %v to end after SIGTERM", took)
	}
	if code != exitFindings {
		t.Fatalf("exit %d after SIGTERM with the mutant's findings, want 1\n%s", code, stderr.String())
	}
	if !strings.Contains(out.String(), "ci: FAIL (exit 1)") || !strings.Contains(out.String(), "(interrupted)") {
		t.Fatalf("no summary after SIGTERM:\n%s", out.String())
	}
	r := &ciRun{code: code, stdout: out.String()}
	readResults(t, r, jx, jj)
	if !r.res.Interrupted || r.res.Counts.New == 0 {
		t.Fatalf("JSON: interrupted %v, %d new findings", r.res.Interrupted, r.res.Counts.New)
	}
}

// TestCIBadInput: each bad input is exit 2 with a one-line message.
func TestCIBadInput(t *testing.T) {
	dir := t.TempDir()
	badKnown := filepath.Join(dir, "known.txt")
	os.WriteFile(badKnown, []byte("# ok\nsig expires=tomorrow reason=x\n"), 0o644)
	catchAll := filepath.Join(dir, "catchall.txt")
	os.WriteFile(catchAll, []byte("* reason=everything\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--target", "sim", "--budget", "-1s"}, "--budget must be positive"},
		{[]string{"--target", "sim", "--budget", "0"}, "--budget must be positive"},
		{[]string{"--target", "sim", "--budget", "1s"}, "too short"},
		{[]string{"--target", "sim", "extra"}, `unexpected argument "extra"`},
		{[]string{"--target", "sim", "--min-programs", "-1"}, "--min-programs must be >= 0"},
		{[]string{"--target", "sim", "--baseline-replays", "0"}, "--baseline-replays must be >= 1"},
		{[]string{"--target", "sim", "--baseline", "x"}, "--baseline is a kernel image for --target qemu"},
		{[]string{"--target", "native", "--baseline-mutant", "none"}, "are for --target sim"},
		{[]string{"--target", "sim", "--kernel", "bzImage"}, "flags of another target than --target sim: --kernel (qemu)"},
		{[]string{"--target", "native", "--mutant", "x"}, "--mutant (sim)"},
		// --fork-impl belongs to every target (not to another one); the
		// simulated kernel cannot switch.
		{[]string{"--target", "sim", "--fork-impl", "stock"}, "cannot switch fork implementations"},
		{[]string{"--target", "sim", "--known-issues", badKnown}, badKnown + ":2:expires: want a date"},
		{[]string{"--target", "sim", "--known-issues", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"--target", "sim", "--known-issues", catchAll}, catchAll + `:1:pattern: "*" waives every finding`},
		{[]string{"--target", "sim", "--fork", "async", "--baseline-mutant", "nope"}, "baseline:"},
		{[]string{"--target", "sim", "--mutant", "nope"}, "nope"},
		{[]string{"--target", "sim", "--corrupt", "nope"}, "unknown corruption"},
		{[]string{"--target", "sim", "--kcidb", filepath.Join(dir, "k.json"), "--kcidb-origin", "Bad-Origin"}, `--kcidb: kcidb: origin "Bad-Origin"`},
		{[]string{"--target", "sim", "--profile", "nope"}, "--profile"},
		{[]string{"--target", "sim", "--replay-findings", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"--target", "qemu", "--kernel", "/bin/ls"}, ""}, // kernel check: exit 2 from the gate
	}
	for _, c := range cases {
		args := append([]string{"ci"}, c.args...)
		if c.want == "" {
			if !strings.Contains(strings.Join(c.args, " "), "--workdir") {
				args = append(args, "--workdir", filepath.Join(dir, "w"))
			}
			code, out, errs := forkfuzz(t, args...)
			if code != exitError || !strings.Contains(out, "ci: ERROR (exit 2): harness error") {
				t.Errorf("%v: exit %d\n%s%s", c.args, code, out, errs)
			}
			continue
		}
		code, _, errs := forkfuzz(t, args...)
		if code != exitError || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", c.args, code, errs, c.want)
		}
	}
}

// TestCIGateNative: the host kernel with the executor's test-only
// corruption: exit 1; programs the corruption cannot falsify run
// uncorrupted (a warning) instead of ending the campaign with harness
// errors; kernel report oracles are skipped outside QEMU.
func TestCIGateNative(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	r := runCI(t, "--target", "native", "--corrupt", "child-misses-write", "--budget", "8s", "-q", "--corpus", "../../corpus/regress")
	if r.code != exitFindings || r.res.Counts.New == 0 || r.res.HarnessErrors != 0 {
		t.Fatalf("exit %d (%s), %d new, %d harness errors", r.code, r.res.Reason, r.res.Counts.New, r.res.HarnessErrors)
	}
	if r.res.Kernel.Target != "native" || r.res.Kernel.Release == "" {
		t.Fatalf("kernel identity %+v", r.res.Kernel)
	}
	warned := false
	for _, w := range r.res.Warnings {
		warned = warned || strings.Contains(w, "did not apply")
	}
	for _, o := range r.res.Oracles {
		if strings.HasPrefix(o.Oracle, "kernel-") && o.NotApplicable == "" {
			t.Errorf("oracle %s applicable on the native target", o.Oracle)
		}
	}
	if !warned {
		t.Errorf("no warning about programs the corruption did not apply to: %q", r.res.Warnings)
	}
}

// TestCIGateEarlierFindings: a gate on a workdir that holds a failing
// gate's findings (a persistent CI workspace) judges only what it saw:
// the old findings are moved aside, kept and named in a warning, and an
// unmodified kernel passes (it used to exit 1 with the old findings as
// new, or 2).
func TestCIGateEarlierFindings(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	w := filepath.Join(t.TempDir(), "forkfuzz-ci")
	r := runCI(t, append([]string{"--budget", "6s", "--workdir", w}, mutantArgs...)...)
	if r.code != exitFindings {
		t.Fatalf("mutant: exit %d, want 1: %s", r.code, r.res.Reason)
	}
	r = runCI(t, "--budget", "6s", "--workdir", w, "--target", "sim", "--fork", "async", "--min-programs", "1", "-q")
	if r.code != exitClean || r.res.Counts.Findings != 0 {
		t.Fatalf("unmodified model on the used workdir: exit %d, %d findings: %s", r.code, r.res.Counts.Findings, r.res.Reason)
	}
	var moved string
	for _, wn := range r.res.Warnings {
		if i := strings.Index(wn, "moved to "); i >= 0 {
			moved = strings.Fields(wn[i+len("moved to "):])[0]
		}
	}
	if moved == "" || !strings.HasPrefix(moved, filepath.Join(w, "earlier")+"/") {
		t.Fatalf("no warning naming where the earlier findings went: %q", r.res.Warnings)
	}
	ents, err := os.ReadDir(moved)
	if err != nil || len(ents) == 0 {
		t.Fatalf("earlier findings not kept at %s: %v (%d entries)", moved, err, len(ents))
	}
}

// TestCIGateFixes: a claimed fix (--fixes) is confirmed when the baseline
// fails the reproducer and the kernel under test never does (exit 0),
// refuted when the kernel under test still fails it (exit 1), and
// unconfirmed when the baseline never failed it (exit 2).
func TestCIGateFixes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: three 10 s gates")
	}
	base := []string{"--target", "sim", "--fork", "async", "--fail-rate", "0.5", "--baseline-mutant", "async-rollback-partial",
		"--budget", "10s", "--fix-runs", "4", "--corpus", "../../corpus/rollback", "-q"}
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		status string
	}{
		{"fixed", []string{"--fixes", "testdata/fix-pmd-rw.ffz"}, exitClean, gate.FixFixed},
		{"not fixed", []string{"--fixes", "testdata/fix-pmd-rw.ffz", "--mutant", "async-rollback-partial"}, exitFindings, gate.FixNotFixed},
		{"unconfirmed", []string{"--fixes", "../../corpus/rollback/childcopy.ffz"}, exitError, gate.FixUnconfirmed},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCI(t, append(append([]string{}, base...), c.args...)...)
			if r.code != c.code || len(r.res.Fixes) != 1 || r.res.Fixes[0].Status != c.status {
				t.Fatalf("exit %d, fixes %+v; want exit %d and %s\n%s", r.code, r.res.Fixes, c.code, c.status, r.stdout)
			}
			f := r.res.Fixes[0]
			if f.BaselineRuns != 4 || f.PatchedRuns != 4 || !strings.Contains(r.stdout, "fix "+c.status) {
				t.Errorf("runs %d/%d, want 4 on each kernel; stdout:\n%s", f.BaselineRuns, f.PatchedRuns, r.stdout)
			}
			// The claims run before fuzzing, which gets the rest.
			var order []string
			for _, p := range r.res.Phases {
				if p.Name == "fixes" || p.Name == "fuzz" {
					order = append(order, p.Name)
				}
			}
			if strings.Join(order, ",") != "fixes,fuzz" {
				t.Errorf("phases %v, want fixes before fuzz", order)
			}
		})
	}
	if code, _, errs := forkfuzz(t, "ci", "--target", "sim", "--fixes", "testdata/fix-pmd-rw.ffz", "--budget", "10s", "-q"); code != exitError || !strings.Contains(errs, "--fixes needs a baseline") {
		t.Errorf("--fixes without a baseline: exit %d\n%s", code, errs)
	}
}
