package gate

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// kcidbSchema is KCIDB's I/O schema v5.3 as kcidb-io exports it
// (testdata/kcidb/README.md), compiled as kcidb-io validates it: JSON
// Schema draft 7 with format assertions.
var kcidbSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	f, err := os.Open("testdata/kcidb/schema-v5.json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	if err := c.AddResource("kcidb-schema-v5.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("kcidb-schema-v5.json")
})

func validateKCIDB(t *testing.T, doc []byte) error {
	t.Helper()
	sch, err := kcidbSchema()
	if err != nil {
		t.Fatalf("compiling the vendored KCIDB schema: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// kcidbOptions are the options each case is written with: the pass case
// with everything a caller can add, the harness-error case attached to
// builds another origin submitted.
func kcidbOptions(name string) KCIDBOptions {
	switch name {
	case "pass":
		return KCIDBOptions{Origin: "forkfuzz", RunID: "ci-1234", Architecture: "x86_64", LogURL: "https://ci.example.org/jobs/1234/results.json",
			Checkout: KCIDBSource{TreeName: "mm", GitRepositoryURL: "https://git.kernel.org/pub/scm/linux/kernel/git/akpm/mm.git",
				GitCommitHash: "0123456789abcdef0123456789abcdef01234567", GitRepositoryBranch: "mm-unstable"},
			BaselineCheckout: KCIDBSource{TreeName: "mainline", GitCommitHash: "89abcdef0123456789abcdef0123456789abcdef"},
			ForkLatency: []LatencyFigure{{Name: "p50", Value: 180 * time.Microsecond, Comment: "fork of a 1 GiB process"},
				{Name: "p99", Value: 2100 * time.Microsecond}}}
	case "harness-error":
		return KCIDBOptions{BuildID: "kernelci:build-77", BaselineBuildID: "kernelci:build-76"}
	}
	return KCIDBOptions{}
}

func TestKCIDBGolden(t *testing.T) {
	for name, r := range writerCases() {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteKCIDB(&b, r, kcidbOptions(name)); err != nil {
				t.Fatal(err)
			}
			if err := validateKCIDB(t, b.Bytes()); err != nil {
				t.Fatalf("the submission does not validate against KCIDB schema v5.3: %v\n%s", err, b.String())
			}
			golden(t, "kcidb/"+name+".json", b.Bytes())
		})
	}
}

// kcidbStatuses maps each test path to its status.
func kcidbStatuses(t *testing.T, r *Result, o KCIDBOptions) (map[string]string, *KCIDBSubmission) {
	t.Helper()
	s, err := KCIDB(r, o)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for _, tc := range s.Tests {
		if _, dup := st[tc.Path]; dup {
			t.Fatalf("path %s written twice", tc.Path)
		}
		st[tc.Path] = tc.Status
	}
	return st, s
}

// TestKCIDBStatusMapping: the kernel is FAIL only for its findings (new,
// pre-existing and known alike: the code is faulty), harness trouble is
// ERROR or MISS, an oracle that judged nothing or cannot fire is SKIP,
// never PASS.
func TestKCIDBStatusMapping(t *testing.T) {
	st, s := kcidbStatuses(t, writersFindings(), KCIDBOptions{})
	want := map[string]string{
		"forkfuzz":                                 KCIDBFail,
		"forkfuzz.harness":                         KCIDBError,
		"forkfuzz.oracle.snapshot":                 KCIDBFail, // pre-existing
		"forkfuzz.oracle.memory":                   KCIDBFail, // known
		"forkfuzz.oracle.errno":                    KCIDBPass,
		"forkfuzz.oracle.pipe":                     KCIDBSkip, // judged nothing
		"forkfuzz.oracle.rollback":                 KCIDBFail, // new
		"forkfuzz.oracle.pagetable":                KCIDBFail,
		"forkfuzz.oracle.executor-crash":           KCIDBError, // harness flake
		"forkfuzz.oracle.kernel-kasan":             KCIDBSkip,  // not applicable
		"forkfuzz.corpus.seeds.fork-basic_ffz":     KCIDBPass,
		"forkfuzz.corpus.seeds.cow-race_ffz":       KCIDBFail,
		"forkfuzz.corpus.regress.rollback-nth_ffz": KCIDBMiss,
		"forkfuzz.corpus.regress.vmsplice_2_ffz":   KCIDBError,
	}
	for p, w := range want {
		if st[p] != w {
			t.Errorf("%s: status %q, want %q", p, st[p], w)
		}
	}
	if len(st) != len(want) {
		t.Errorf("%d tests, want %d: %v", len(st), len(want), st)
	}
	// One issue per signature; the harness flake blames the harness.
	if len(s.Issues) != 5 {
		t.Fatalf("%d issues, want 5", len(s.Issues))
	}
	for _, is := range s.Issues {
		flake := strings.Contains(is.ID, "harness-flake:")
		if is.Culprit == nil || is.Culprit.Harness != flake || is.Culprit.Code == flake {
			t.Errorf("issue %s: culprit %+v", is.ID, is.Culprit)
		}
	}
	// Incidents: each finding present on the kernel under test; on the
	// baseline present exactly where it reproduced there.
	base := map[string]bool{}
	for _, in := range s.Incidents {
		if in.BuildID == s.Builds[1].ID {
			base[in.IssueID] = in.Present
		} else if !in.Present || in.BuildID != s.Builds[0].ID {
			t.Errorf("incident %s: present %v on %s", in.ID, in.Present, in.BuildID)
		}
	}
	wantBase := map[string]bool{"forkfuzz:harness-flake:executor-crash": false, "forkfuzz:pagetable:pmd-rw-not-restored": false,
		"forkfuzz:rollback:parent-changed": false, "forkfuzz:snapshot:lost-store:anon-private": true}
	if len(base) != len(wantBase) {
		t.Errorf("baseline incidents %v, want %v", base, wantBase)
	}
	for id, p := range wantBase {
		if got, ok := base[id]; !ok || got != p {
			t.Errorf("baseline incident of %s: present %v (written %v), want %v", id, got, ok, p)
		}
	}

	st, _ = kcidbStatuses(t, writersPass(), KCIDBOptions{})
	for p, w := range map[string]string{"forkfuzz": KCIDBPass, "forkfuzz.harness": KCIDBDone, "forkfuzz.oracle.linearizability": KCIDBSkip,
		"forkfuzz.oracle.snapshot": KCIDBPass} {
		if st[p] != w {
			t.Errorf("pass: %s: status %q, want %q", p, st[p], w)
		}
	}
	// No program ran: the oracles did not run (MISS), the gate broke (ERROR).
	st, s = kcidbStatuses(t, writersHarnessError(), kcidbOptions("harness-error"))
	for p, w := range map[string]string{"forkfuzz": KCIDBError, "forkfuzz.harness": KCIDBError, "forkfuzz.oracle.snapshot": KCIDBMiss,
		"forkfuzz.oracle.kernel-bug": KCIDBMiss, "forkfuzz.oracle.kernel-kasan": KCIDBSkip} {
		if st[p] != w {
			t.Errorf("harness-error: %s: status %q, want %q", p, st[p], w)
		}
	}
	if len(s.Checkouts) != 0 || len(s.Builds) != 0 || s.Tests[0].BuildID != "kernelci:build-77" {
		t.Errorf("with existing build ids: %d checkouts, %d builds, tests on %s", len(s.Checkouts), len(s.Builds), s.Tests[0].BuildID)
	}
}

// TestKCIDBLatencyNumber: a fork-latency figure is a DONE test whose
// numeric output is in seconds.
func TestKCIDBLatencyNumber(t *testing.T) {
	s, err := KCIDB(writersPass(), kcidbOptions("pass"))
	if err != nil {
		t.Fatal(err)
	}
	var got *KCIDBTest
	for i := range s.Tests {
		if s.Tests[i].Path == "forkfuzz.fork_latency.p99" {
			got = &s.Tests[i]
		}
	}
	if got == nil || got.Status != KCIDBDone || got.Number == nil || got.Number.Value != 0.0021 || got.Number.Unit != "s" {
		t.Fatalf("fork latency test: %+v", got)
	}
}

// TestKCIDBSchemaRejects: the vendored schema and the validator bite.
func TestKCIDBSchemaRejects(t *testing.T) {
	var b bytes.Buffer
	if err := WriteKCIDB(&b, writersFindings(), KCIDBOptions{}); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(b.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, _ := json.Marshal(m)
		return out
	}
	first := func(m map[string]any, key string) map[string]any { return m[key].([]any)[0].(map[string]any) }
	bad := map[string][]byte{
		"no version":       mutate(func(m map[string]any) { delete(m, "version") }),
		"major 4":          mutate(func(m map[string]any) { m["version"].(map[string]any)["major"] = 4 }),
		"minor 9":          mutate(func(m map[string]any) { m["version"].(map[string]any)["minor"] = 9 }),
		"unknown property": mutate(func(m map[string]any) { first(m, "tests")["verdict"] = "bad" }),
		"status":           mutate(func(m map[string]any) { first(m, "tests")["status"] = "BROKEN" }),
		"origin":           mutate(func(m map[string]any) { first(m, "tests")["origin"] = "ForkFuzz" }),
		"id":               mutate(func(m map[string]any) { first(m, "builds")["id"] = "no-origin" }),
		"path":             mutate(func(m map[string]any) { first(m, "tests")["path"] = "forkfuzz..oracle" }),
		"date-time":        mutate(func(m map[string]any) { first(m, "tests")["start_time"] = "yesterday" }),
		"null":             mutate(func(m map[string]any) { first(m, "tests")["comment"] = nil }),
		"issue version":    mutate(func(m map[string]any) { delete(first(m, "issues"), "version") }),
		"git url":          mutate(func(m map[string]any) { first(m, "checkouts")["git_repository_url"] = "git://example.org/linux.git" }),
	}
	for name, doc := range bad {
		if err := validateKCIDB(t, doc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKCIDBOptionsRejected: options the schema would reject are an
// error, not an invalid submission.
func TestKCIDBOptionsRejected(t *testing.T) {
	bad := map[string]KCIDBOptions{
		"origin":     {Origin: "Fork-Fuzz"},
		"build id":   {BuildID: "build-77"},
		"arch":       {Architecture: "x86-64"},
		"log url":    {LogURL: "results.json"},
		"git url":    {Checkout: KCIDBSource{GitRepositoryURL: "git://example.org/linux.git"}},
		"commit":     {BaselineCheckout: KCIDBSource{GitCommitHash: "v6.12"}},
		"patchset":   {Checkout: KCIDBSource{PatchsetHash: "abc"}},
		"latency":    {ForkLatency: []LatencyFigure{{Name: "#"}}},
		"run id NUL": {RunID: "a\x00b"},
	}
	for name, o := range bad {
		if _, err := KCIDB(writersPass(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKCIDBCutsLongLogs: a log excerpt stays within the schema's limit,
// and NULs (which no KCIDB string may hold) are dropped.
func TestKCIDBCutsLongLogs(t *testing.T) {
	r := writersFindings()
	r.Findings[2].Explanation = strings.Repeat("é\x00", 20000)
	var b bytes.Buffer
	if err := WriteKCIDB(&b, r, KCIDBOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := validateKCIDB(t, b.Bytes()); err != nil {
		t.Fatal(err)
	}
}
