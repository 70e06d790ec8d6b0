package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// KCIDB: KernelCI's common results database. WriteKCIDB writes one
// submission of I/O schema v5.3 (github.com/kernelci/kcidb-io,
// kcidb_io/schema/v05_03.py; vendored as testdata/kcidb/schema-v5.json and
// checked in the tests): the kernel under test (and the baseline) as a
// checkout and a build, the gate's verdicts as tests, every finding as an
// issue and each sighting of it as an incident.
//
// Test statuses follow KCIDB's definitions, which describe the tested
// code, not the gate's verdict on a patch:
//   - FAIL: the kernel is faulty: an oracle family, corpus program or the
//     gate found a new, pre-existing or known finding (known and
//     pre-existing ones fail on the baseline too; KernelCI's triage, not the
//     status, says they are old: each has an issue and an incident);
//   - ERROR: forkfuzz itself broke (a phase's harness error, an executor
//     death or hang that did not reproduce or was never replayed, an
//     unhealthy harness);
//   - MISS: the test did not run because of the harness (no program ran,
//     a corpus program left for lack of budget);
//   - SKIP: not applicable (an oracle the target cannot fire) or never
//     exercised (an oracle that judged nothing): never PASS;
//   - PASS: the oracle judged something and found nothing;
//   - DONE: measurements (fork latency) and the harness report.
//
// The path "forkfuzz" is the gate's verdict (pass PASS, fail FAIL, error
// ERROR), so KernelCI's regression tracking follows what the CI job gated
// on.

// KCIDB schema version written.
const (
	KCIDBMajor = 5
	KCIDBMinor = 3
)

// KCIDBOptions say what the Result does not know.
type KCIDBOptions struct {
	// Origin names the submitting CI system (lowercase [a-z0-9_]+;
	// default "forkfuzz"); every id is "origin:local".
	Origin string
	// RunID tells this gate's objects from other runs' (e.g. the CI job's
	// id); default: a hash of the kernel image (or release), the start
	// time, the seed and the host.
	RunID string
	// BuildID, if set, is an existing KCIDB build (another origin's: the
	// CI that built the kernel) the tests attach to; no checkout or
	// build is written for the kernel under test then. BaselineBuildID
	// is the same for the baseline.
	BuildID, BaselineBuildID string
	// Checkout and BaselineCheckout are the kernels' sources where the
	// caller knows them (the image does not say); unknown fields are
	// left out.
	Checkout, BaselineCheckout KCIDBSource
	// Architecture of the kernel builds ([a-z0-9_]*, e.g. "x86_64"),
	// left out when empty.
	Architecture string
	// LogURL is where the CI job publishes the gate's log or results
	// (an absolute URI), set on the "forkfuzz" test.
	LogURL string
	// ForkLatency are fork-latency figures measured beside the gate (the
	// Result holds none): each becomes a DONE test
	// "forkfuzz.fork_latency.NAME" with its value in seconds.
	ForkLatency []LatencyFigure
}

// KCIDBSource is a kernel's source checkout, as far as it is known.
type KCIDBSource struct {
	TreeName            string // e.g. "mainline", "net-next"
	GitRepositoryURL    string // https:// only (the schema's rule)
	GitCommitHash       string // 40 lowercase hex digits
	GitCommitName       string // git describe
	GitRepositoryBranch string
	PatchsetHash        string // 64 lowercase hex digits (patches applied on top)
}

// LatencyFigure is one fork-latency figure.
type LatencyFigure struct {
	Name    string // e.g. "p50", "p99", "max"
	Value   time.Duration
	Comment string
}

// KCIDB statuses (the schema's enum, highest priority first).
const (
	KCIDBFail  = "FAIL"
	KCIDBError = "ERROR"
	KCIDBMiss  = "MISS"
	KCIDBPass  = "PASS"
	KCIDBDone  = "DONE"
	KCIDBSkip  = "SKIP"
)

// KCIDBSubmission is one KCIDB I/O document.
type KCIDBSubmission struct {
	Version   KCIDBVersion    `json:"version"`
	Checkouts []KCIDBCheckout `json:"checkouts,omitempty"`
	Builds    []KCIDBBuild    `json:"builds,omitempty"`
	Tests     []KCIDBTest     `json:"tests,omitempty"`
	Issues    []KCIDBIssue    `json:"issues,omitempty"`
	Incidents []KCIDBIncident `json:"incidents,omitempty"`
}

// KCIDBVersion is the schema version of a submission.
type KCIDBVersion struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

// KCIDBCheckout is a source checkout.
type KCIDBCheckout struct {
	ID                  string         `json:"id"`
	Origin              string         `json:"origin"`
	TreeName            string         `json:"tree_name,omitempty"`
	GitRepositoryURL    string         `json:"git_repository_url,omitempty"`
	GitCommitHash       string         `json:"git_commit_hash,omitempty"`
	GitCommitName       string         `json:"git_commit_name,omitempty"`
	GitRepositoryBranch string         `json:"git_repository_branch,omitempty"`
	PatchsetHash        string         `json:"patchset_hash,omitempty"`
	Comment             string         `json:"comment,omitempty"`
	Misc                map[string]any `json:"misc,omitempty"`
}

// KCIDBBuild is a build of a checkout: here, a kernel image.
type KCIDBBuild struct {
	ID           string         `json:"id"`
	CheckoutID   string         `json:"checkout_id"`
	Origin       string         `json:"origin"`
	Comment      string         `json:"comment,omitempty"`
	Architecture string         `json:"architecture,omitempty"`
	ConfigName   string         `json:"config_name,omitempty"`
	Misc         map[string]any `json:"misc,omitempty"`
}

// KCIDBTest is a test run on a build.
type KCIDBTest struct {
	ID          string            `json:"id"`
	BuildID     string            `json:"build_id"`
	Origin      string            `json:"origin"`
	Path        string            `json:"path"`
	Status      string            `json:"status"`
	Comment     string            `json:"comment,omitempty"`
	LogURL      string            `json:"log_url,omitempty"`
	LogExcerpt  string            `json:"log_excerpt,omitempty"`
	Number      *KCIDBNumber      `json:"number,omitempty"`
	StartTime   string            `json:"start_time,omitempty"`
	Duration    float64           `json:"duration,omitempty"`
	Environment *KCIDBEnvironment `json:"environment,omitempty"`
	Misc        map[string]any    `json:"misc,omitempty"`
}

// KCIDBNumber is a test's numeric output.
type KCIDBNumber struct {
	Value  float64 `json:"value"`
	Unit   string  `json:"unit,omitempty"`
	Prefix string  `json:"prefix,omitempty"` // "metric" or "binary"
}

// KCIDBEnvironment is where a test ran.
type KCIDBEnvironment struct {
	Comment string         `json:"comment,omitempty"`
	Misc    map[string]any `json:"misc,omitempty"`
}

// KCIDBIssue is a finding's signature: the same id across runs.
type KCIDBIssue struct {
	ID            string         `json:"id"`
	Version       int            `json:"version"`
	Origin        string         `json:"origin"`
	ReportSubject string         `json:"report_subject,omitempty"`
	Comment       string         `json:"comment,omitempty"`
	Culprit       *KCIDBCulprit  `json:"culprit,omitempty"`
	Misc          map[string]any `json:"misc,omitempty"`
}

// KCIDBCulprit says which layer an issue blames.
type KCIDBCulprit struct {
	Code    bool `json:"code"`
	Tool    bool `json:"tool"`
	Harness bool `json:"harness"`
}

// KCIDBIncident is an issue seen (or, on the baseline, not seen) on a
// build or test.
type KCIDBIncident struct {
	ID           string         `json:"id"`
	Origin       string         `json:"origin"`
	IssueID      string         `json:"issue_id"`
	IssueVersion int            `json:"issue_version"`
	BuildID      string         `json:"build_id,omitempty"`
	TestID       string         `json:"test_id,omitempty"`
	Present      bool           `json:"present"`
	Comment      string         `json:"comment,omitempty"`
	Misc         map[string]any `json:"misc,omitempty"`
}

// kcidbIssueVersion is the version of every issue written: an issue's
// fields depend only on its signature.
const kcidbIssueVersion = 1

// kcidbLogMax is the schema's maxLength of log_excerpt (in characters).
const kcidbLogMax = 16384

var (
	kcidbOriginRE = regexp.MustCompile(`^[a-z0-9_]+$`)
	kcidbIDRE     = regexp.MustCompile(`^[a-z0-9_]+:[^\x00]*$`)
	kcidbArchRE   = regexp.MustCompile(`^[a-z0-9_]*$`)
	kcidbSHA1RE   = regexp.MustCompile(`^[0-9a-f]{40}$`)
	kcidbSHA256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	kcidbPathRE   = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)
)

// WriteKCIDB writes r as one KCIDB submission (JSON).
func WriteKCIDB(w io.Writer, r *Result, o KCIDBOptions) error {
	s, err := KCIDB(r, o)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	return enc.Encode(s)
}

// KCIDB builds the submission WriteKCIDB writes. It fails only on
// options the schema would reject.
func KCIDB(r *Result, o KCIDBOptions) (*KCIDBSubmission, error) {
	if err := o.fill(r); err != nil {
		return nil, err
	}
	k := &kcidbWriter{r: r, o: o, s: &KCIDBSubmission{Version: KCIDBVersion{KCIDBMajor, KCIDBMinor}}, testIDs: map[string]bool{}}
	k.build = k.addBuild("", &r.Kernel, o.BuildID, o.Checkout)
	if r.Baseline != nil || o.BaselineBuildID != "" {
		k.baseBuild = k.addBuild("baseline", r.Baseline, o.BaselineBuildID, o.BaselineCheckout)
	}
	k.tests()
	k.findings()
	return k.s, nil
}

// fill sets the defaults and checks the options against the schema.
func (o *KCIDBOptions) fill(r *Result) error {
	if o.Origin == "" {
		o.Origin = "forkfuzz"
	}
	if !kcidbOriginRE.MatchString(o.Origin) {
		return fmt.Errorf("kcidb: origin %q: want a lowercase identifier [a-z0-9_]+", o.Origin)
	}
	if o.RunID == "" {
		o.RunID = defaultRunID(r)
	}
	if strings.ContainsRune(o.RunID, 0) {
		return fmt.Errorf("kcidb: run id %q holds a NUL", o.RunID)
	}
	for _, id := range []string{o.BuildID, o.BaselineBuildID} {
		if id != "" && !kcidbIDRE.MatchString(id) {
			return fmt.Errorf("kcidb: build id %q: want ORIGIN:ID", id)
		}
	}
	if !kcidbArchRE.MatchString(o.Architecture) {
		return fmt.Errorf("kcidb: architecture %q: want [a-z0-9_]*", o.Architecture)
	}
	if o.LogURL != "" {
		if u, err := url.Parse(o.LogURL); err != nil || u.Scheme == "" {
			return fmt.Errorf("kcidb: log URL %q is not an absolute URI", o.LogURL)
		}
	}
	for _, c := range []KCIDBSource{o.Checkout, o.BaselineCheckout} {
		if err := c.check(); err != nil {
			return err
		}
	}
	for _, l := range o.ForkLatency {
		if kcidbPathSegment(l.Name) == "" {
			return fmt.Errorf("kcidb: fork latency figure without a name")
		}
	}
	return nil
}

func (c KCIDBSource) check() error {
	switch {
	case c.GitRepositoryURL != "" && !strings.HasPrefix(c.GitRepositoryURL, "https://"):
		return fmt.Errorf("kcidb: git repository URL %q: the schema takes https:// URLs only", c.GitRepositoryURL)
	case c.GitCommitHash != "" && !kcidbSHA1RE.MatchString(c.GitCommitHash):
		return fmt.Errorf("kcidb: git commit hash %q: want 40 lowercase hex digits", c.GitCommitHash)
	case c.PatchsetHash != "" && !kcidbSHA256RE.MatchString(c.PatchsetHash):
		return fmt.Errorf("kcidb: patchset hash %q: want 64 lowercase hex digits", c.PatchsetHash)
	}
	return nil
}

// defaultRunID is stable for one gate run and differs between runs.
func defaultRunID(r *Result) string {
	kern := r.Kernel.SHA256
	if kern == "" {
		kern = r.Kernel.Target + "/" + r.Kernel.Release
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d|%s", kern, r.Started.UTC().Format(time.RFC3339Nano), r.Seed, r.Hostname)))
	return "gate-" + hex.EncodeToString(h[:8])
}

type kcidbWriter struct {
	r                *Result
	o                KCIDBOptions
	s                *KCIDBSubmission
	build, baseBuild string
	// oracleTest maps an oracle family to its test id.
	oracleTest map[string]string
	testIDs    map[string]bool
}

func (k *kcidbWriter) id(local string) string { return k.o.Origin + ":" + local }

// addBuild writes the checkout and build of one kernel (unless the
// caller names an existing build) and returns the build id.
func (k *kcidbWriter) addBuild(role string, kid *KernelIdentity, existing string, src KCIDBSource) string {
	if existing != "" {
		return existing
	}
	local := k.o.RunID
	if role != "" {
		local += "-" + role
	}
	if kid == nil {
		kid = &KernelIdentity{}
	}
	co := KCIDBCheckout{ID: k.id(local), Origin: k.o.Origin, TreeName: kcidbClean(src.TreeName), GitRepositoryURL: src.GitRepositoryURL,
		GitCommitHash: src.GitCommitHash, GitCommitName: kcidbClean(src.GitCommitName), GitRepositoryBranch: kcidbClean(src.GitRepositoryBranch),
		PatchsetHash: src.PatchsetHash, Comment: kcidbClean(kid.Release)}
	co.Misc = kcidbMisc("role", kcidbKernelRole(role), "kernel_release", kid.Release, "kernel_version", kid.Version)
	b := KCIDBBuild{ID: k.id(local), CheckoutID: co.ID, Origin: k.o.Origin, Architecture: k.o.Architecture}
	b.Comment = kcidbClean(kcidbKernelComment(kid))
	b.Misc = kcidbMisc("target", kid.Target, "image", kid.Image, "image_sha256", kid.SHA256, "config", kid.Config,
		"config_sha256", kid.ConfigSHA256, "target_flags", strings.Join(kid.Flags, " "))
	k.s.Checkouts = append(k.s.Checkouts, co)
	k.s.Builds = append(k.s.Builds, b)
	return b.ID
}

func kcidbKernelRole(role string) string {
	if role == "" {
		return "kernel under test"
	}
	return role
}

func kcidbKernelComment(kid *KernelIdentity) string {
	switch {
	case kid.Image != "" && kid.SHA256 != "":
		return fmt.Sprintf("kernel image %s (sha256 %s), release %s", kid.Image, kid.SHA256, kid.Release)
	case kid.Image != "":
		return fmt.Sprintf("kernel image %s, release %s", kid.Image, kid.Release)
	}
	return fmt.Sprintf("target %s, release %s", kid.Target, kid.Release)
}

// kcidbMisc builds a misc object from key, value pairs, leaving out empty
// strings and zero numbers (no property can be null).
func kcidbMisc(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			if v != "" {
				m[kv[i].(string)] = kcidbClean(v)
			}
		case int:
			if v != 0 {
				m[kv[i].(string)] = v
			}
		case int64:
			if v != 0 {
				m[kv[i].(string)] = v
			}
		case float64:
			if v != 0 {
				m[kv[i].(string)] = v
			}
		case bool:
			if v {
				m[kv[i].(string)] = v
			}
		case nil:
		default:
			m[kv[i].(string)] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// kcidbClean drops NULs, which no KCIDB string may hold.
func kcidbClean(s string) string { return strings.ReplaceAll(s, "\x00", "") }

// kcidbExcerpt is s cut to the schema's log_excerpt limit.
func kcidbExcerpt(s string) string {
	s = kcidbClean(s)
	if utf8.RuneCountInString(s) <= kcidbLogMax {
		return s
	}
	const tail = "\n[cut to the KCIDB limit]"
	r := []rune(s)
	return string(r[:kcidbLogMax-utf8.RuneCountInString(tail)]) + tail
}

// kcidbPathSegment is name as one test path segment ([a-zA-Z0-9_-]+).
func kcidbPathSegment(name string) string {
	return strings.Trim(kcidbPathRE.ReplaceAllString(name, "_"), "_")
}

// kcidbPath turns a slash-separated name into dot-separated segments.
func kcidbPath(prefix, name string) string {
	var segs []string
	for _, p := range strings.Split(name, "/") {
		if s := kcidbPathSegment(p); s != "" {
			segs = append(segs, s)
		}
	}
	if len(segs) == 0 {
		segs = []string{"unnamed"}
	}
	return prefix + "." + strings.Join(segs, ".")
}

// addTest appends t (on the kernel under test), giving it a unique id.
func (k *kcidbWriter) addTest(t KCIDBTest) string {
	local := k.o.RunID + ":" + t.Path
	for n := 2; k.testIDs[local]; n++ {
		local = fmt.Sprintf("%s:%s~%d", k.o.RunID, t.Path, n)
	}
	k.testIDs[local] = true
	t.ID, t.Origin = k.id(local), k.o.Origin
	if t.BuildID == "" {
		t.BuildID = k.build
	}
	t.Comment, t.LogExcerpt = kcidbClean(t.Comment), kcidbExcerpt(t.LogExcerpt)
	if t.StartTime == "" && !k.r.Started.IsZero() {
		t.StartTime = k.r.Started.UTC().Format(time.RFC3339Nano)
	}
	t.Environment = k.environment()
	k.s.Tests = append(k.s.Tests, t)
	return t.ID
}

func (k *kcidbWriter) environment() *KCIDBEnvironment {
	host := k.r.Hostname
	if host == "" {
		host = "an unnamed host"
	}
	return &KCIDBEnvironment{Comment: kcidbClean(fmt.Sprintf("forkfuzz ci, target %s, on %s", k.r.Kernel.Target, host)),
		Misc: kcidbMisc("target", k.r.Kernel.Target, "hostname", k.r.Hostname, "forkfuzz_version", k.r.Version)}
}

func (k *kcidbWriter) tests() {
	r := k.r
	root := KCIDBTest{Path: "forkfuzz", Status: kcidbOutcomeStatus(r.Outcome), Comment: fmt.Sprintf("forkfuzz ci %s (exit %d): %s", r.Outcome, r.ExitCode, r.Reason),
		LogURL: k.o.LogURL, Duration: r.ElapsedS}
	root.Misc = kcidbMisc("outcome", r.Outcome, "exit_code", r.ExitCode, "seed", r.Seed, "profile", r.Profile,
		"programs", r.Programs, "corpus_programs", r.CorpusPrograms, "fuzz_programs", r.FuzzPrograms, "forks", r.Forks,
		"min_programs", r.MinPrograms, "min_fuzz_programs", r.MinFuzzPrograms, "judged", r.Judged, "budget_seconds", r.BudgetS, "interrupted", r.Interrupted,
		"groups", r.Counts.Groups, "new_groups", r.Counts.NewGroups, "known_groups", r.Counts.KnownGroups,
		"pre_existing_groups", r.Counts.PreexistingGroups, "harness_flake_groups", r.Counts.HarnessFlakeGroups, "workdir", r.Workdir)
	if len(r.Warnings) > 0 {
		root.LogExcerpt = "warnings:\n" + strings.Join(r.Warnings, "\n")
	}
	k.addTest(root)
	k.addTest(k.harnessTest())
	k.oracleTest = map[string]string{}
	for _, oc := range r.Oracles {
		k.oracleTest[oc.Oracle] = k.addTest(k.oracleCase(oc))
	}
	for _, cp := range r.Corpus {
		k.addTest(k.corpusCase(cp))
	}
	for _, c := range r.Fixes {
		k.addTest(k.fixCase(c))
	}
	for _, l := range k.o.ForkLatency {
		k.addTest(KCIDBTest{Path: "forkfuzz.fork_latency." + kcidbPathSegment(l.Name), Status: KCIDBDone, Comment: l.Comment,
			Number: &KCIDBNumber{Value: l.Value.Seconds(), Unit: "s", Prefix: "metric"}})
	}
}

func kcidbOutcomeStatus(outcome string) string {
	switch outcome {
	case "pass":
		return KCIDBPass
	case "fail":
		return KCIDBFail
	}
	return KCIDBError
}

// harnessTest reports forkfuzz's own health: DONE (it says nothing about
// the kernel) or ERROR.
func (k *kcidbWriter) harnessTest() KCIDBTest {
	r := k.r
	t := KCIDBTest{Path: "forkfuzz.harness", Status: KCIDBDone}
	var errs []string
	for _, ph := range r.Phases {
		if ph.Error != "" {
			errs = append(errs, fmt.Sprintf("phase %s: %s", ph.Name, ph.Error))
		}
	}
	for _, cp := range r.Corpus {
		if cp.Status == "harness-error" {
			errs = append(errs, fmt.Sprintf("corpus %s: %s", cp.Name, cp.Note))
		}
	}
	for _, f := range r.Findings {
		if writerHarnessTrouble(f) {
			errs = append(errs, fmt.Sprintf("%s %s: %s", writerFindingStatus(f), f.Signature, f.StatusReason))
		}
	}
	t.Comment = fmt.Sprintf("%d harness errors, %d run(s) with an unreproduced executor death or hang (%d tolerated)",
		r.HarnessErrors, r.HarnessFlakeRuns, r.MaxHarnessFlakes)
	if len(errs) > 0 || r.HarnessFlakeRuns > int64(r.MaxHarnessFlakes) {
		t.Status = KCIDBError
		t.LogExcerpt = strings.Join(errs, "\n")
	}
	if r.HarnessFlakeRuns > int64(r.MaxHarnessFlakes) {
		t.Comment += ": the harness is unhealthy"
	}
	t.Misc = kcidbMisc("harness_errors", r.HarnessErrors, "harness_flake_runs", r.HarnessFlakeRuns, "max_harness_flakes", r.MaxHarnessFlakes)
	return t
}

// oracleCase is one oracle family's test (see the status rules above).
func (k *kcidbWriter) oracleCase(oc OracleCase) KCIDBTest {
	r := k.r
	t := KCIDBTest{Path: "forkfuzz.oracle." + kcidbPathSegment(oc.Oracle)}
	var kernel, flakes []string
	var log strings.Builder
	for _, f := range r.Findings {
		if f.Oracle != oc.Oracle {
			continue
		}
		fmt.Fprintf(&log, "== %s [%s, group %s]: %s\n%s\n", f.Signature, writerFindingStatus(f), f.Group, f.StatusReason, f.Explanation)
		if writerHarnessTrouble(f) {
			flakes = append(flakes, f.Signature+" ("+writerFindingStatus(f)+")")
		} else {
			kernel = append(kernel, f.Signature+" ("+writerFindingStatus(f)+")")
		}
	}
	switch {
	case len(kernel) > 0:
		t.Status, t.Comment = KCIDBFail, fmt.Sprintf("%d finding(s): %s", len(kernel), strings.Join(kernel, ", "))
	case len(flakes) > 0:
		t.Status, t.Comment = KCIDBError, "harness trouble, not counted against the kernel: "+strings.Join(flakes, ", ")
	case oc.NotApplicable != "":
		t.Status, t.Comment = KCIDBSkip, "not applicable: "+oc.NotApplicable
	case oc.Judgments == 0 && r.Programs == 0 && r.Outcome == "error":
		t.Status, t.Comment = KCIDBMiss, "not run: no program ran ("+r.Reason+")"
	case oc.Judgments == 0:
		t.Status, t.Comment = KCIDBSkip, fmt.Sprintf("not exercised: 0 %s in %d programs", oc.Needs, r.Programs)
	default:
		t.Status, t.Comment = KCIDBPass, fmt.Sprintf("judged %d %s", oc.Judgments, oc.Needs)
	}
	if t.Status == KCIDBFail || t.Status == KCIDBError {
		t.LogExcerpt = log.String()
	}
	t.Misc = kcidbMisc("judgments", oc.Judgments, "needs", oc.Needs, "new", oc.New, "known", oc.Known,
		"pre_existing", oc.Preexisting, "harness_flakes", oc.HarnessFlakes, "not_applicable", oc.NotApplicable)
	return t
}

// writerFindingStatus is a finding's status; an unclassified one counts as new (the
// gate never passes a finding it could not clear).
func writerFindingStatus(f FindingRecord) string {
	if f.Status == "" {
		return StatusNew
	}
	return f.Status
}

// writerHarnessTrouble: f blames neither the kernel nor clears it: an executor
// death or hang that did not reproduce (harness-flake) or that was never
// replayed (unconfirmed). It is ERROR in KCIDB, a SKIP with a diagnostic
// in KTAP, never a kernel failure.
func writerHarnessTrouble(f FindingRecord) bool {
	s := writerFindingStatus(f)
	return s == StatusHarnessFlake || s == StatusUnconfirmed
}

// corpusCase is one replayed corpus program's test.
func (k *kcidbWriter) corpusCase(cp CorpusCase) KCIDBTest {
	t := KCIDBTest{Path: kcidbPath("forkfuzz.corpus", cp.Name), Duration: cp.Seconds}
	switch cp.Status {
	case "pass":
		t.Status, t.Comment = KCIDBPass, cp.Judged
	case "skipped":
		t.Status, t.Comment = KCIDBMiss, "not run: "+cp.Note
	case "harness-error":
		t.Status, t.Comment = KCIDBError, "harness error: "+cp.Note
	default: // fail: the kernel is blamed unless every signature was a harness flake
		t.Status, t.Comment = KCIDBFail, "finding(s): "+strings.Join(cp.Signatures, ", ")
		if k.allHarnessTrouble(cp.Signatures) {
			t.Status, t.Comment = KCIDBError, "harness trouble, not counted against the kernel: "+strings.Join(cp.Signatures, ", ")
		}
		t.LogExcerpt = cp.Explanation
	}
	t.Misc = kcidbMisc("source", cp.Source, "file", cp.Path, "replay", cp.Replay, "note", cp.Note)
	return t
}

// fixCase is a claimed fix (--fixes): PASS confirmed, FAIL the patched
// kernel still fails the reproducer, ERROR unconfirmed.
func (k *kcidbWriter) fixCase(c FixCase) KCIDBTest {
	t := KCIDBTest{Path: kcidbPath("forkfuzz.fixes", c.Path), Comment: c.Status + ": " + c.Reason}
	switch c.Status {
	case FixFixed:
		t.Status = KCIDBPass
	case FixNotFixed:
		t.Status = KCIDBFail
	default:
		t.Status = KCIDBError
	}
	t.Misc = kcidbMisc("file", c.Path, "baseline_runs", c.BaselineRuns, "baseline_failed", c.BaselineFailed,
		"patched_runs", c.PatchedRuns, "patched_failed", c.PatchedFailed, "baseline_replay", c.BaselineCommand, "replay", c.PatchedCommand)
	return t
}

func (k *kcidbWriter) allHarnessTrouble(sigs []string) bool {
	for _, s := range sigs {
		if f := k.r.findingBySig([]string{s}); f == nil || !writerHarnessTrouble(*f) {
			return false
		}
	}
	return len(sigs) > 0
}

// findings writes an issue per signature and its incidents: present on
// the kernel under test's oracle test, and present or absent on the
// baseline build where it was replayed there.
func (k *kcidbWriter) findings() {
	seen := map[string]bool{}
	for _, f := range k.r.Findings {
		if writerFindingStatus(f) == StatusUnconfirmed {
			continue // no cause to name: the oracle's ERROR test tells it
		}
		is := k.issue(f)
		if !seen[is.ID] {
			seen[is.ID] = true
			k.s.Issues = append(k.s.Issues, is)
		}
		inc := KCIDBIncident{ID: k.id(k.o.RunID + ":" + f.Signature), Origin: k.o.Origin, IssueID: is.ID, IssueVersion: is.Version,
			BuildID: k.build, TestID: k.oracleTest[f.Oracle], Present: true}
		inc.Comment = kcidbClean(fmt.Sprintf("%s: %s; %s", writerFindingStatus(f), f.StatusReason, f.Reproducibility()))
		inc.Misc = kcidbMisc("status", writerFindingStatus(f), "group", f.Group, "source", f.Source, "known_issue", f.KnownIssue, "dir", f.Dir,
			"replay", f.Replay, "reproduced", f.Reproduced, "replays", f.Replays, "original_ops", f.OriginalOps, "minimized_ops", f.MinimizedOps)
		k.s.Incidents = append(k.s.Incidents, inc)
		if b := f.Baseline; b != nil && b.Runs > 0 && k.baseBuild != "" {
			bi := KCIDBIncident{ID: k.id(k.o.RunID + "-baseline:" + f.Signature), Origin: k.o.Origin, IssueID: is.ID, IssueVersion: is.Version,
				BuildID: k.baseBuild, Present: b.Reproduced > 0}
			bi.Comment = kcidbClean(fmt.Sprintf("reproduced %d/%d on the baseline", b.Reproduced, b.Runs))
			bi.Misc = kcidbMisc("command", b.Command, "note", b.Note)
			k.s.Incidents = append(k.s.Incidents, bi)
		}
	}
	sort.SliceStable(k.s.Issues, func(i, j int) bool { return k.s.Issues[i].ID < k.s.Issues[j].ID })
}

// issue is the KCIDB issue of f's signature. An unreproduced executor
// death blames the harness and gets an issue of its own, so that the
// signature's kernel-blaming issue never changes its culprit.
func (k *kcidbWriter) issue(f FindingRecord) KCIDBIssue {
	is := KCIDBIssue{ID: k.id(f.Signature), Version: kcidbIssueVersion, Origin: k.o.Origin, ReportSubject: kcidbClean(f.Signature),
		Comment: kcidbClean(fmt.Sprintf("forkfuzz %s oracle: %s", f.Oracle, f.Signature)), Culprit: &KCIDBCulprit{Code: true}}
	if writerFindingStatus(f) == StatusHarnessFlake {
		is.ID = k.id("harness-flake:" + f.Signature)
		is.Comment = kcidbClean(fmt.Sprintf("forkfuzz harness: %s that did not reproduce, with no kernel report", f.Signature))
		is.Culprit = &KCIDBCulprit{Harness: true}
	}
	is.Misc = kcidbMisc("oracle", f.Oracle, "signature", f.Signature)
	return is
}
