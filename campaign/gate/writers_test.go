package gate

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Golden files of the writers kernel CI reads (KCIDB, KTAP, the baseline
// table) under testdata/, rewritten by `go test -run 'KCIDB|KTAP|BaselineTable' -update`.
var updateGolden = flag.Bool("update", false, "rewrite the writers' golden files under testdata/")

// writerCases are the Results every writer is held to: a clean pass, a
// failing gate with a new, a pre-existing, a known and a harness-flake
// finding group (and flaky rates), and a gate whose VM never booted.
func writerCases() map[string]*Result {
	return map[string]*Result{"pass": writersPass(), "findings": writersFindings(), "harness-error": writersHarnessError()}
}

var writersStart = time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)

func writersBase(outcome string, exit int, reason string) *Result {
	return &Result{Schema: "forkfuzz-ci", SchemaVersion: SchemaVersion, Version: "forkfuzz v0.9.0", Outcome: outcome, ExitCode: exit, Reason: reason,
		Started: writersStart, Elapsed: 95 * time.Second, ElapsedS: 95, BudgetS: 120, Seed: 1, Profile: "default", Hostname: "ci-runner-3",
		Kernel: KernelIdentity{Target: "qemu", Image: "patched/bzImage", SHA256: "5d41402abc4b2a76b9719d911017c592aa9b3e7e0b8e1f4c1e5c63d5a1c27c20",
			Release: "6.12.0-rc3+", Version: "6.12.0-rc3+ (ci@build) #1 SMP PREEMPT_DYNAMIC", Config: "patched/.config",
			ConfigSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Flags: []string{"--kernel", "patched/bzImage"}},
		Baseline: &KernelIdentity{Target: "qemu", Image: "base/bzImage", SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
			Release: "6.12.0-rc3"},
		Workdir: "forkfuzz-ci", MinPrograms: 10, MaxHarnessFlakes: 1,
		Phases: []Phase{{Name: "check", Seconds: 2.2, Note: "usable"}, {Name: "boot", Seconds: 47}, {Name: "replay", Seconds: 17},
			{Name: "fuzz", Seconds: 25}, {Name: "baseline", Seconds: 4}, {Name: "collect", Seconds: 0.1}, {Name: "report", Seconds: 0.1}},
	}
}

func writersPass() *Result {
	r := writersBase("pass", ExitPass, "no new finding in 42 programs")
	r.Programs, r.CorpusPrograms, r.FuzzPrograms, r.Forks = 42, 30, 12, 310
	r.Judged = "42 runs, 1870 ops, 96 views, 24576 pages"
	r.Corpus = []CorpusCase{
		{Name: "seeds/fork-basic.ffz", Source: "seeds", Path: "corpus/seeds/fork-basic.ffz", Status: "pass", Judged: "judged 40 ops", Seconds: 0.4},
		{Name: "regress/cow-after-fork.ffz", Source: "regress", Path: "corpus/regress/cow-after-fork.ffz", Status: "pass", Judged: "judged 12 ops", Seconds: 0.3},
	}
	r.Oracles = []OracleCase{
		{Oracle: "snapshot", Judgments: 24576, Needs: "pages compared in process views"},
		{Oracle: "linearizability", Needs: "thread-written cells in child snapshots (programs with writer threads)"},
		{Oracle: "rollback", Judgments: 6, Needs: "rollback measurements (forks with fail_nth, oom_memcg or a kill)"},
		{Oracle: "executor-crash", Judgments: 42, Needs: "programs that ran"},
		{Oracle: "kernel-bug", Judgments: 42, Needs: "programs that ran"},
	}
	return r
}

func writersFindings() *Result {
	r := writersBase("fail", ExitFindings, "1 new finding group(s): G1 pagetable:pmd-rw-not-restored, rollback:parent-changed")
	r.Programs, r.CorpusPrograms, r.FuzzPrograms, r.Forks = 40, 28, 12, 290
	r.HarnessFlakeRuns, r.HarnessErrors = 1, 1
	r.Judged = "40 runs, 1700 ops, 90 views, 20480 pages"
	r.Warnings = []string{"known.txt:5: known issue \"kernel-warning/*\" expired on 2026-11-30 and no longer matches"}
	r.Corpus = []CorpusCase{
		{Name: "seeds/fork-basic.ffz", Source: "seeds", Path: "corpus/seeds/fork-basic.ffz", Status: "pass", Judged: "judged 40 ops", Seconds: 0.4},
		{Name: "seeds/cow-race.ffz", Source: "seeds", Path: "corpus/seeds/cow-race.ffz", Status: "fail", Signatures: []string{"snapshot:lost-store:anon-private"},
			Explanation: "child 1 saw 0x0 at page 3 of region 0, want 0x2a (the parent's store before fork)", Replay: "forkfuzz exec corpus/seeds/cow-race.ffz", Seconds: 0.5},
		{Name: "regress/rollback-nth.ffz", Source: "regress", Path: "corpus/regress/rollback-nth.ffz", Status: "skipped", Note: "budget spent"},
		{Name: "regress/vmsplice#2.ffz", Source: "regress", Path: "corpus/regress/vmsplice#2.ffz", Status: "harness-error", Note: "vm died: connection lost"},
	}
	r.Findings = []FindingRecord{
		{Signature: "executor-crash", Oracle: "executor-crash", Group: "G4", Status: StatusHarnessFlake,
			StatusReason: "the executor died in 1 run(s) but reproduced 0/3 on replays, and the console showed no kernel report: an unreproduced harness error, not counted against the kernel (files: forkfuzz-ci/findings/executor-crash)",
			Source:       "fuzz", Dir: "forkfuzz-ci/findings/executor-crash", Program: "forkfuzz-ci/findings/executor-crash/program.ffz", OriginalOps: 30,
			Replay: "forkfuzz exec --kernel patched/bzImage forkfuzz-ci/findings/executor-crash/program.ffz", Reproduced: 0, Replays: 3,
			Baseline: &BaselineReplay{Runs: 2, Reproduced: 0, Note: "baseline replays cut short after 2 runs: budget spent"}, Explanation: "in vm: connection lost (unexpected EOF)"},
		{Signature: "memory:lost-store:anon-private", Oracle: "memory", Group: "G3", Status: StatusKnown, KnownIssue: "known.txt:2",
			StatusReason: "known issue (known.txt:2): upstream, fixed in 6.13", Source: "fuzz", Dir: "forkfuzz-ci/findings/memory-lost-store",
			Program: "forkfuzz-ci/findings/memory-lost-store/program.ffz", OriginalOps: 51, Replay: "forkfuzz exec forkfuzz-ci/findings/memory-lost-store/program.ffz",
			Explanation: "process 0 read 0x0 at page 1 of region 2, want 0x7"},
		{Signature: "pagetable:pmd-rw-not-restored", Oracle: "pagetable", Group: "G1", Status: StatusNew, StatusReason: "passes on the baseline (0/3 replays)",
			Source: "fuzz", Dir: "forkfuzz-ci/findings/pagetable-pmd", Program: "forkfuzz-ci/findings/pagetable-pmd/program.ffz",
			Minimized: "forkfuzz-ci/findings/pagetable-pmd/minimized.ffz", OriginalOps: 64, MinimizedOps: 5,
			Replay: "forkfuzz exec --kernel patched/bzImage forkfuzz-ci/findings/pagetable-pmd/minimized.ffz", Reproduced: 2, Replays: 5,
			Fresh:       &FreshReplay{Runs: 5, Reproduced: 1},
			Baseline:    &BaselineReplay{Runs: 3, Reproduced: 0, Command: "forkfuzz exec --kernel base/bzImage forkfuzz-ci/findings/pagetable-pmd/minimized.ffz"},
			Explanation: "after a failed fork (fail_nth 3) the parent's PMD of region 0 stayed read-only\nfirst bad: process 0, op 4, region 0, page 0"},
		{Signature: "rollback:parent-changed", Oracle: "rollback", Group: "G1", Status: StatusNew, StatusReason: "passes on the baseline (0/3 replays)",
			Source: "fuzz", Dir: "forkfuzz-ci/findings/rollback-parent", Program: "forkfuzz-ci/findings/rollback-parent/program.ffz",
			Minimized: "forkfuzz-ci/findings/rollback-parent/minimized.ffz", OriginalOps: 40, MinimizedOps: 6,
			Replay: "forkfuzz exec --kernel patched/bzImage forkfuzz-ci/findings/rollback-parent/minimized.ffz", Reproduced: 5, Replays: 5,
			Fresh:    &FreshReplay{Runs: 2, Reproduced: 2},
			Baseline: &BaselineReplay{Runs: 3, Reproduced: 0}, Explanation: "the parent's page 2 changed across a failed fork"},
		{Signature: "snapshot:lost-store:anon-private", Oracle: "snapshot", Group: "G2", Status: StatusPreexisting, StatusReason: "also fails on the baseline (2/3 replays)",
			Source: "corpus:seeds/cow-race.ffz", Dir: "forkfuzz-ci/findings/snapshot-lost-store", Program: "forkfuzz-ci/findings/snapshot-lost-store/program.ffz",
			OriginalOps: 12, Replay: "forkfuzz exec --kernel patched/bzImage forkfuzz-ci/findings/snapshot-lost-store/program.ffz", Reproduced: 3, Replays: 3,
			Baseline: &BaselineReplay{Runs: 3, Reproduced: 2}, Explanation: "child 1 saw 0x0 at page 3 of region 0, want 0x2a"},
	}
	r.Groups = []Group{
		{ID: "G1", Status: StatusNew, Signatures: []string{"pagetable:pmd-rw-not-restored", "rollback:parent-changed"}, Why: []string{"one reproducer shows both signatures"}},
		{ID: "G2", Status: StatusPreexisting, Signatures: []string{"snapshot:lost-store:anon-private"}},
		{ID: "G3", Status: StatusKnown, Signatures: []string{"memory:lost-store:anon-private"}},
		{ID: "G4", Status: StatusHarnessFlake, Signatures: []string{"executor-crash"}},
	}
	r.Counts = Counts{Groups: 4, NewGroups: 1, KnownGroups: 1, PreexistingGroups: 1, Findings: 5, New: 2, Known: 1, Preexisting: 1, HarnessFlakes: 1, HarnessFlakeGroups: 1}
	r.Oracles = []OracleCase{
		{Oracle: "snapshot", Preexisting: 1, Judgments: 20480, Needs: "pages compared in process views"},
		{Oracle: "memory", Known: 1, Judgments: 20480, Needs: "pages compared in process views"},
		{Oracle: "errno", Judgments: 1700, Needs: "operations that ran"},
		{Oracle: "pipe", Needs: "readpipe operations that ran"},
		{Oracle: "rollback", New: 1, Judgments: 9, Needs: "rollback measurements (forks with fail_nth, oom_memcg or a kill)"},
		{Oracle: "pagetable", New: 1, Judgments: 9, Needs: "rollback measurements (forks with fail_nth, oom_memcg or a kill)"},
		{Oracle: "executor-crash", HarnessFlakes: 1, Judgments: 40, Needs: "programs that ran"},
		{Oracle: "kernel-kasan", NotApplicable: "the kernel has no KASAN (CONFIG_KASAN is not set)", Needs: "programs that ran"},
	}
	return r
}

func writersHarnessError() *Result {
	r := writersBase("error", ExitError, "harness error: boot: opening the target: qemu: the VM did not come up within 3m0s")
	r.Phases = []Phase{{Name: "check", Seconds: 2.2, Note: "usable"}, {Name: "boot", Seconds: 118, Error: "opening the target: qemu: the VM did not come up within 3m0s"},
		{Name: "collect"}, {Name: "report", Seconds: 0.1}}
	r.Judged = "0 runs"
	r.Oracles = []OracleCase{
		{Oracle: "snapshot", Needs: "pages compared in process views"},
		{Oracle: "kernel-bug", Needs: "programs that ran"},
		{Oracle: "kernel-kasan", NotApplicable: "the kernel has no KASAN (CONFIG_KASAN is not set)", Needs: "programs that ran"},
	}
	return r
}

// golden compares got with testdata/path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	path = filepath.Join("testdata", path)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run with -update to accept it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestKCIDBKTAPBaselineTableHarnessTrouble: harness trouble the gate never
// replayed (status "unconfirmed") is an error of the gate in every
// format, never a kernel failure, and names no KCIDB issue.
func TestKCIDBKTAPBaselineTableHarnessTrouble(t *testing.T) {
	r := writersFindings()
	r.Findings[0].Status, r.Findings[0].StatusReason = StatusUnconfirmed, "the executor died; never replayed (budget spent)"
	r.Findings[0].Replays, r.Findings[0].Baseline = 0, nil
	r.Groups[3].Status = StatusUnconfirmed

	st, s := kcidbStatuses(t, r, KCIDBOptions{})
	if got := st["forkfuzz.oracle.executor-crash"]; got != KCIDBError {
		t.Errorf("KCIDB: executor-crash oracle %s, want ERROR", got)
	}
	for _, is := range s.Issues {
		if strings.Contains(is.ID, "executor-crash") {
			t.Errorf("KCIDB: unconfirmed trouble names an issue: %+v", is)
		}
	}
	var b bytes.Buffer
	if err := WriteKTAP(&b, r); err != nil {
		t.Fatal(err)
	}
	tests, err := parseKTAP(b.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tests {
		if strings.HasPrefix(tl.Desc, "G4 ") && (!tl.OK || tl.Directive != "SKIP" || !strings.HasPrefix(tl.Reason, "unconfirmed: ")) {
			t.Errorf("KTAP: %+v", tl)
		}
	}
	if table := BaselineTable(r); !strings.Contains(table, "| `executor-crash` | -[^") {
		t.Errorf("table:\n%s", table)
	}
}

// The claims of --fixes reach every format: a KCIDB test each (valid
// against the schema; PASS, FAIL, ERROR), a KTAP line each (ok, not ok,
// SKIP; the plan counts them), a row each in the baseline table.
func TestWritersFixes(t *testing.T) {
	r := writersPass()
	r.Fixes = []FixCase{
		{Path: "regress/a.ffz", Status: FixFixed, Reason: "present on the baseline", Baseline: map[string]int{"kernel-bug/x": 3}, BaselineRuns: 5, BaselineFailed: 3, PatchedRuns: 5},
		{Path: "regress/b.ffz", Status: FixNotFixed, Reason: "the patched kernel still fails it", BaselineRuns: 5, BaselineFailed: 5, PatchedRuns: 5, PatchedFailed: 2},
		{Path: "regress/c.ffz", Status: FixUnconfirmed, Reason: "the baseline never failed it", BaselineRuns: 5, PatchedRuns: 5},
	}
	st, s := kcidbStatuses(t, r, kcidbOptions("fixes"))
	for path, want := range map[string]string{"forkfuzz.fixes.regress.a_ffz": KCIDBPass, "forkfuzz.fixes.regress.b_ffz": KCIDBFail, "forkfuzz.fixes.regress.c_ffz": KCIDBError} {
		if st[path] != want {
			t.Errorf("KCIDB %s = %q, want %q (all: %v)", path, st[path], want, st)
		}
	}
	var buf bytes.Buffer
	if err := WriteKCIDB(&buf, r, kcidbOptions("fixes")); err != nil {
		t.Fatal(err)
	}
	if err := validateKCIDB(t, buf.Bytes()); err != nil {
		t.Errorf("KCIDB with fixes: %v", err)
	}
	if len(s.Tests) == 0 {
		t.Fatal("no KCIDB tests")
	}
	buf.Reset()
	if err := WriteKTAP(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines, err := parseKTAP(buf.String())
	if err != nil {
		t.Fatalf("KTAP with fixes: %v\n%s", err, buf.String())
	}
	got := map[string]string{}
	for _, l := range lines {
		got[l.Desc] = fmt.Sprintf("%v %s", l.OK, l.Directive)
	}
	for desc, want := range map[string]string{"fixes regress/a.ffz": "true ", "fixes regress/b.ffz": "false ", "fixes regress/c.ffz": "true SKIP"} {
		if got[desc] != want {
			t.Errorf("KTAP %q = %q, want %q", desc, got[desc], want)
		}
	}
	tab := BaselineTable(r)
	for _, want := range []string{"| --fixes `regress/a.ffz`: kernel-bug/x 3x | 3/5 | 0/5 | fix fixed |", "| 5/5 | 2/5 | fix not-fixed |", "fix unconfirmed"} {
		if !strings.Contains(tab, want) {
			t.Errorf("baseline table lacks %q:\n%s", want, tab)
		}
	}
}
