package gate

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func sampleResult() *Result {
	r := &Result{Schema: "forkfuzz-ci", SchemaVersion: SchemaVersion, Started: time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC),
		Elapsed: 3 * time.Second, Seed: 1, Kernel: KernelIdentity{Target: "sim-async", Release: "sim-async"}, MinPrograms: 1,
		Programs: 3, CorpusPrograms: 2, FuzzPrograms: 1, Outcome: "fail", ExitCode: 1}
	r.Phases = []Phase{{Name: "check", Note: "ok"}, {Name: "boot", Error: "console said \x07 oops <&>"}, {Name: "baseline", Skipped: "none"}}
	r.Corpus = []CorpusCase{
		{Name: "seeds/a.ffz", Source: "seeds", Status: "pass", Judged: "judged 3 ops"},
		{Name: "seeds/b.ffz", Source: "seeds", Status: "fail", Signatures: []string{"snapshot:lost-store:anon-private"}, Explanation: "lost \x00 store", Replay: "forkfuzz exec x"},
		{Name: "regress/c.ffz", Source: "regress", Status: "skipped", Note: "budget"},
		{Name: "regress/d.ffz", Source: "regress", Status: "harness-error", Note: "vm died"},
	}
	r.Findings = []FindingRecord{
		{Signature: "snapshot:lost-store:anon-private", Oracle: "snapshot", Group: "G1", Status: StatusNew, Explanation: "x", Replay: "forkfuzz exec y"},
		{Signature: "memory:lost-store:anon-private", Oracle: "memory", Group: "G1", Status: StatusKnown, StatusReason: "known"},
	}
	r.Oracles = []OracleCase{{Oracle: "snapshot", New: 1}, {Oracle: "memory", Known: 1}, {Oracle: "kernel-bug", NotApplicable: "no console"}}
	return r
}

func TestJUnitValidates(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	if err := ValidateJUnit(b.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	js := sampleResult().JUnit()
	// 3 phases + min-programs + harness health, 4 corpus cases, 3 oracles.
	if js.Tests != 12 || js.Failures != 2 || js.Errors != 2 || js.Skipped != 3 {
		t.Fatalf("counts: tests %d failures %d errors %d skipped %d", js.Tests, js.Failures, js.Errors, js.Skipped)
	}
	if !strings.Contains(b.String(), "forkfuzz exec y") || strings.Contains(b.String(), "\x07") {
		t.Fatal("the failure lacks its replay command, or a control character got through")
	}
}

// TestValidateJUnitRejects: the schema check itself bites.
func TestValidateJUnitRejects(t *testing.T) {
	good := `<testsuites tests="1" failures="1" errors="0"><testsuite name="s" tests="1" failures="1" errors="0" time="1.0" timestamp="2026-12-03T06:00:00" hostname="h"><testcase name="c" classname="k" time="0.1"><failure type="t" message="m">x</failure></testcase></testsuite></testsuites>`
	if err := ValidateJUnit([]byte(good)); err != nil {
		t.Fatalf("good document rejected: %v", err)
	}
	bad := map[string]string{
		"not xml":           `<testsuites>`,
		"root":              `<tests/>`,
		"suite attr":        strings.Replace(good, ` hostname="h"`, "", 1),
		"case attr":         strings.Replace(good, ` classname="k"`, "", 1),
		"failure type":      strings.Replace(good, ` type="t"`, "", 1),
		"suite count":       strings.Replace(good, `tests="1" failures="1" errors="0" time`, `tests="2" failures="1" errors="0" time`, 1),
		"total count":       strings.Replace(good, `<testsuites tests="1"`, `<testsuites tests="3"`, 1),
		"timestamp":         strings.Replace(good, `2026-12-03T06:00:00`, `yesterday`, 1),
		"time":              strings.Replace(good, `time="0.1"`, `time="soon"`, 1),
		"unexpected child":  strings.Replace(good, `<testcase `, `<bogus/><testcase `, 1),
		"two outcomes":      strings.Replace(good, `</failure>`, `</failure><skipped/>`, 1),
		"negative failures": strings.Replace(good, `failures="1" errors="0" time`, `failures="-1" errors="0" time`, 1),
	}
	for name, doc := range bad {
		if err := ValidateJUnit([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// An oracle that judged nothing is not a pass: its case is skipped and
// says what it needed; one that judged something passes and says how much.
func TestJUnitUnexercisedOracleSkipped(t *testing.T) {
	r := sampleResult()
	r.Oracles = append(r.Oracles, OracleCase{Oracle: "linearizability", Needs: "thread-written cells"},
		OracleCase{Oracle: "rollback", Judgments: 7, Needs: "rollback measurements"})
	js := r.JUnit()
	var lin, rb *JUnitTestCase
	for i := range js.Suites[2].Cases {
		c := &js.Suites[2].Cases[i]
		switch c.Name {
		case "linearizability":
			lin = c
		case "rollback":
			rb = c
		}
	}
	if lin == nil || lin.Skipped == nil || !strings.Contains(lin.Skipped.Message, "not exercised: 0 thread-written cells in 3 programs") {
		t.Fatalf("unexercised oracle: %+v", lin)
	}
	if rb == nil || rb.Skipped != nil || rb.Failure != nil || !strings.Contains(rb.SystemOut, "judged 7 rollback measurements") {
		t.Fatalf("exercised oracle: %+v", rb)
	}
}

// A corpus case that failed with a known and a new signature fails in
// JUnit, whichever signature comes first.
func TestJUnitCorpusCaseAnyNew(t *testing.T) {
	r := &Result{Findings: []FindingRecord{{Signature: "kernel-bug/WARNING-in-x", Status: StatusKnown}, {Signature: "snapshot:child-sees-parent-write", Status: StatusNew}}}
	for _, tc := range []struct {
		sigs []string
		fail bool
	}{
		{[]string{"kernel-bug/WARNING-in-x", "snapshot:child-sees-parent-write"}, true},
		{[]string{"snapshot:child-sees-parent-write", "kernel-bug/WARNING-in-x"}, true},
		{[]string{"kernel-bug/WARNING-in-x"}, false},
	} {
		c := r.corpusCase(CorpusCase{Name: "regress/x.ffz", Source: "regress", Status: "fail", Signatures: tc.sigs})
		if (c.Failure != nil) != tc.fail {
			t.Errorf("signatures %v: failure %+v, want failing %v", tc.sigs, c.Failure, tc.fail)
		}
	}
}
