package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Phase is one step of the gate and how long it took.
type Phase struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
	// Share is the time the phase was given (0: unbounded or not applicable).
	ShareSeconds float64 `json:"share_seconds,omitempty"`
	Note         string  `json:"note,omitempty"`
	Skipped      string  `json:"skipped,omitempty"`
	Error        string  `json:"error,omitempty"`
}

// CorpusCase is one replayed corpus program.
type CorpusCase struct {
	Name        string   `json:"name"`
	Source      string   `json:"source"` // seeds, a directory's base name, or "finding"
	Path        string   `json:"path"`
	Status      string   `json:"status"` // pass, fail, skipped, harness-error
	Signatures  []string `json:"signatures,omitempty"`
	Explanation string   `json:"explanation,omitempty"`
	Replay      string   `json:"replay,omitempty"`
	Judged      string   `json:"judged,omitempty"`
	Note        string   `json:"note,omitempty"`
	// Cover: the replay collected kernel coverage, as the run that
	// showed this earlier finding did. Other corpus replays collect none:
	// nothing in a gate reads it, and it costs 1.3-1.5x a run.
	Cover bool `json:"kcov,omitempty"`
	// NoCensus: the replay took no page census at forks, as the run that
	// showed this earlier finding did not; other corpus replays take it.
	NoCensus bool `json:"no_census,omitempty"`
	// Sites: where the program's injected faults are meant to hit (a
	// regression file's site directives, corpus.ParseSites; an earlier
	// finding's recorded run). A passing run whose fault hit elsewhere
	// (or did not fail) tested something else: the program is aimed at
	// the sites (Aimed: the program run instead) or, if nothing nearby
	// hits them, the case is skipped saying so (OffSite counts such runs).
	Sites    []campaign.FaultSite `json:"fault_sites,omitempty"`
	Aimed    string               `json:"aimed_program,omitempty"`
	OffSite  int                  `json:"off_site,omitempty"`
	Duration time.Duration        `json:"-"`
	Seconds  float64              `json:"seconds"`
	prog     *prog.Program
}

// mode is how c's replay runs.
func (c *CorpusCase) mode() RunMode { return RunMode{NoCover: !c.Cover, NoCensus: c.NoCensus} }

// BaselineReplay is what a reproducer did on the baseline kernel.
type BaselineReplay struct {
	Runs       int    `json:"runs"`
	Reproduced int    `json:"reproduced"`
	Command    string `json:"command,omitempty"`
	Note       string `json:"note,omitempty"`
	// Inconclusive counts the runs the baseline broke in before the
	// program could be judged (a kernel BUG, a dead executor: no
	// observation) with other signatures than the finding's, which are
	// Other. They are not in Runs: they show neither that the baseline
	// has the finding nor that it does not.
	Inconclusive int      `json:"inconclusive,omitempty"`
	Other        []string `json:"inconclusive_signatures,omitempty"`
	// OffSite counts runs that passed while a fork's injected fault hit
	// another allocation than in the finding's run: they tested
	// something else and are not in Runs (the first aims the reproducer
	// at the recorded site: campaign.Aim).
	OffSite int `json:"off_site,omitempty"`
	// Judged counts every judged run of the reproducer on the baseline:
	// Runs, and the runs it broke in (those that showed the finding
	// too: Reproduced can exceed Runs).
	Judged int `json:"judged"`
}

// shownOf is "k/n replays": the runs that showed the finding of those
// judged.
func (b *BaselineReplay) shownOf() string {
	return fmt.Sprintf("%d/%d replays", b.Reproduced, max(b.Judged, b.Runs))
}

// noteOrEmpty is b's Note ("" for a nil b).
func (b *BaselineReplay) noteOrEmpty() string {
	if b == nil {
		return ""
	}
	return b.Note
}

// inconclusiveNote says what the inconclusive runs showed ("" if none).
func (b *BaselineReplay) inconclusiveNote() string {
	if b == nil || b.Inconclusive == 0 {
		return ""
	}
	return fmt.Sprintf("the baseline broke first in %d run(s) (%s)", b.Inconclusive, strings.Join(b.Other, ", "))
}

// FindingRecord is one finding (one signature) of the gate.
type FindingRecord struct {
	Signature string `json:"signature"`
	// ReplayShowed are the other signatures its replays (the campaign's,
	// the gate's confirm replays) failed with, harness trouble left
	// out: a harness event whose replays showed a kernel report or an
	// oracle finding is not a harness flake.
	ReplayShowed []string `json:"replay_showed,omitempty"`
	Oracle       string   `json:"oracle"`
	Group        string   `json:"group"`
	Status       string   `json:"status"` // new, known, pre-existing
	StatusReason string   `json:"status_reason"`
	KnownIssue   string   `json:"known_issue,omitempty"` // file:line of the entry
	Source       string   `json:"source"`                // fuzz or corpus:NAME
	Dir          string   `json:"dir"`
	// Program and Minimized are files in Dir; Replay the command that
	// runs the reproducer (Minimized, else Program) again.
	Program      string `json:"program"`
	Minimized    string `json:"minimized,omitempty"`
	OriginalOps  int    `json:"original_ops"`
	MinimizedOps int    `json:"minimized_ops,omitempty"`
	Replay       string `json:"replay"`
	// RunMode: whether the run that showed it collected no kernel
	// coverage and took no page census (the finding's seed file says
	// "kcov off", "census off"); the gate's replays of it (confirm,
	// baseline, fresh) and Replay run the same way.
	RunMode
	Reproduced int             `json:"reproduced"`
	Replays    int             `json:"replays"`
	Baseline   *BaselineReplay `json:"baseline,omitempty"`
	// Faults are the faults the reproducer injects, and where (empty:
	// none).
	Faults []string `json:"faults"`
	// Mail is the report a maintainer can paste (MailFile), for findings
	// that count against a kernel.
	Mail string `json:"mail,omitempty"`
	// Confirm is what the gate's own replays of harness trouble showed.
	Confirm *ConfirmReplay `json:"confirm,omitempty"`
	// Fresh is what replays on freshly opened targets showed (fresh.go).
	Fresh       *FreshReplay `json:"fresh,omitempty"`
	Explanation string       `json:"explanation"`
	// Evidence is the checker's first bad (process, view, op, region,
	// page) on the reproducer (nil for target events).
	Evidence *checker.Finding `json:"evidence,omitempty"`

	reproProg *prog.Program
	origProg  *prog.Program
	// sites: where the reproducer's recorded run injected its forks'
	// faults (campaign.AimSites; reproSites).
	sites  campaign.Sites
	origEv *checker.Finding
	// reproSigs are the signatures the minimized reproducer's recorded
	// run showed.
	reproSigs []string
}

// Group is a set of findings with one root cause.
type Group struct {
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Signatures []string `json:"signatures"`
	// Why names what the grouped findings share.
	Why []string `json:"why,omitempty"`
}

// OracleCase is one oracle family's JUnit case.
type OracleCase struct {
	Oracle        string `json:"oracle"`
	New           int    `json:"new"`
	Known         int    `json:"known"`
	Preexisting   int    `json:"pre_existing"`
	NotApplicable string `json:"not_applicable,omitempty"`
	HarnessFlakes int    `json:"harness_flakes,omitempty"`
	// Judgments is how much the oracle judged (its unit is Needs): 0
	// means it was never exercised, and its JUnit case is skipped.
	Judgments int    `json:"judgments"`
	Needs     string `json:"needs"`
}

// Counts summarize the findings.
type Counts struct {
	Groups            int `json:"groups"`
	NewGroups         int `json:"new_groups"`
	KnownGroups       int `json:"known_groups"`
	PreexistingGroups int `json:"pre_existing_groups"`
	Findings          int `json:"findings"`
	New               int `json:"new"`
	Known             int `json:"known"`
	Preexisting       int `json:"pre_existing"`
	// HarnessFlakes are executor deaths and hangs that did not reproduce
	// (status harness-flake), in HarnessFlakeGroups groups of their own.
	HarnessFlakes      int `json:"harness_flakes"`
	HarnessFlakeGroups int `json:"harness_flake_groups"`
	// Unconfirmed is harness trouble never replayed (status
	// unconfirmed): the gate errs (exit 2).
	Unconfirmed       int `json:"unconfirmed"`
	UnconfirmedGroups int `json:"unconfirmed_groups"`
}

// SchemaVersion is the version of the JSON summary (docs/ci.md).
const SchemaVersion = 1

// Result is the outcome of a gate; its JSON form is the summary.
type Result struct {
	Schema        string `json:"schema"` // "forkfuzz-ci"
	SchemaVersion int    `json:"schema_version"`
	// Version is the forkfuzz that ran the gate (forkfuzz version).
	Version     string          `json:"forkfuzz_version"`
	Outcome     string          `json:"outcome"` // pass, fail, error
	ExitCode    int             `json:"exit_code"`
	Reason      string          `json:"reason"`
	Started     time.Time       `json:"started"`
	Elapsed     time.Duration   `json:"-"`
	ElapsedS    float64         `json:"elapsed_seconds"`
	BudgetS     float64         `json:"budget_seconds"`
	Interrupted bool            `json:"interrupted,omitempty"`
	Seed        uint64          `json:"seed"`
	Profile     string          `json:"profile"`
	Hostname    string          `json:"hostname"`
	Kernel      KernelIdentity  `json:"kernel"`
	Baseline    *KernelIdentity `json:"baseline,omitempty"`
	Workdir     string          `json:"workdir"`
	Programs    int64           `json:"programs"`
	// CorpusPrograms and FuzzPrograms split Programs.
	CorpusPrograms int64 `json:"corpus_programs"`
	FuzzPrograms   int64 `json:"fuzz_programs"`
	Forks          int64 `json:"forks"`
	HarnessErrors  int64 `json:"harness_errors"`
	// HarnessFlakeRuns counts the runs whose executor death or hang did
	// not reproduce; more than MaxHarnessFlakes make the gate exit 2.
	HarnessFlakeRuns int64  `json:"harness_flake_runs"`
	MaxHarnessFlakes int    `json:"max_harness_flakes"`
	MinPrograms      int    `json:"min_programs"`
	MinFuzzPrograms  int    `json:"min_fuzz_programs"`
	Judged           string `json:"judged"`
	// Tally is what the verdicts rested on, as data: runs, ops, views,
	// pages, cells, skipped ops by kind, unjudged runs, notes and the
	// at-fork evidence (page census, thread stores overlapping forks).
	Tally judge.Tally `json:"tally"`
	// Spent is where the fuzz phase's time went, by phase (host and
	// guest), summed over its programs.
	Spent  *campaign.TimeSpent `json:"time_spent,omitempty"`
	Phases []Phase             `json:"phases"`
	Corpus []CorpusCase        `json:"corpus"`
	// Fixes are the claims of --fixes: each reproducer's runs on the
	// baseline and on the kernel under test (fixes.go).
	Fixes    []FixCase       `json:"fixes,omitempty"`
	Counts   Counts          `json:"counts"`
	Groups   []Group         `json:"groups"`
	Findings []FindingRecord `json:"findings"`
	Oracles  []OracleCase    `json:"oracles"`
	Warnings []string        `json:"warnings,omitempty"`

	harnessErr  string
	reportStart time.Time
}

// WriteFiles writes the JUnit XML and the JSON summary (either path may
// be empty), first counting the time so far into the report phase.
func (r *Result) WriteFiles(junitPath, jsonPath string) error {
	if n := len(r.Phases); n > 0 && r.Phases[n-1].Name == "report" && !r.reportStart.IsZero() {
		d := time.Since(r.reportStart)
		r.Phases[n-1].Duration, r.Phases[n-1].Seconds = d, d.Seconds()
		r.Elapsed = time.Since(r.Started)
		r.ElapsedS = r.Elapsed.Seconds()
	}
	var errs []error
	if junitPath != "" {
		errs = append(errs, writeAtomic(junitPath, r.WriteJUnit))
	}
	if jsonPath != "" {
		errs = append(errs, writeAtomic(jsonPath, r.WriteJSON))
	}
	return errors.Join(errs...)
}

// WriteJSON writes the JSON summary.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// writeAtomic writes path through a temporary file renamed into place.
func writeAtomic(path string, write func(io.Writer) error) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Summary is the human-readable summary, a few lines.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ci: %s (exit %d): %s\n", strings.ToUpper(r.Outcome), r.ExitCode, r.Reason)
	fmt.Fprintf(&b, "ci: kernel %s release %s", r.Kernel.Target, r.Kernel.Release)
	if r.Kernel.Image != "" {
		fmt.Fprintf(&b, " image %s sha256 %.16s", r.Kernel.Image, r.Kernel.SHA256)
	}
	if r.Baseline != nil {
		fmt.Fprintf(&b, "; baseline %s release %s", r.Baseline.Target, r.Baseline.Release)
	}
	fmt.Fprintf(&b, "\nci: %d programs (%d corpus, %d fuzzed), %d forks, seed %d, %.1fs of %.0fs budget%s\n",
		r.Programs, r.CorpusPrograms, r.FuzzPrograms, r.Forks, r.Seed, r.Elapsed.Seconds(), r.BudgetS,
		map[bool]string{true: " (interrupted)", false: ""}[r.Interrupted])
	var ph []string
	for _, p := range r.Phases {
		s := fmt.Sprintf("%s %.1fs", p.Name, p.Seconds)
		if p.Error != "" {
			s += " (error)"
		} else if p.Skipped != "" {
			s += " (skipped)"
		}
		ph = append(ph, s)
	}
	fmt.Fprintf(&b, "ci: phases: %s\n", strings.Join(ph, ", "))
	if l := r.Spent.String(); l != "" {
		fmt.Fprintf(&b, "ci: fuzz time: %s\n", l)
	}
	fmt.Fprintf(&b, "ci: findings: %d signatures in %d groups: %d new, %d known, %d pre-existing, %d harness-flake groups\n",
		r.Counts.Findings, r.Counts.Groups, r.Counts.NewGroups, r.Counts.KnownGroups, r.Counts.PreexistingGroups, r.Counts.HarnessFlakeGroups)
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "ci:   %s [%s] %s\n", g.ID, g.Status, strings.Join(g.Signatures, ", "))
	}
	for _, f := range r.Findings {
		if f.Status == StatusNew {
			fmt.Fprintf(&b, "ci:   new %s (%s): %s; %s; %s; replay: %s\n", f.Signature, f.Group, f.Reproducibility(), f.StatusReason, faultsLine(f.Faults), f.Replay)
		}
		if f.Status == StatusHarnessFlake || f.Status == StatusUnconfirmed {
			fmt.Fprintf(&b, "ci:   %s %s (%s): %s\n", f.Status, f.Signature, f.Group, f.StatusReason)
		}
	}
	for _, c := range r.Fixes {
		fmt.Fprintf(&b, "ci:   fix %s: %s: %s\n", c.Status, c.Path, c.Reason)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "ci: warning: %s\n", w)
	}
	return b.String()
}

func (r *Result) phaseDuration(name string) time.Duration {
	for _, p := range r.Phases {
		if p.Name == name {
			return p.Duration
		}
	}
	return 0
}

func (r *Result) findingBySig(sigs []string) *FindingRecord {
	for _, s := range sigs {
		for i := range r.Findings {
			if r.Findings[i].Signature == s {
				return &r.Findings[i]
			}
		}
	}
	return nil
}

// Reproducibility says how reliably the reproducer showed the finding on
// the kernel under test.
func (f *FindingRecord) Reproducibility() string {
	if v := f.freshVerdict(); v != "" {
		return v
	}
	return f.replayVerdict()
}

// replayVerdict is what the campaign's replays (same target) showed.
func (f *FindingRecord) replayVerdict() string {
	switch {
	case f.Replays == 0 && f.Minimized == "":
		return "not minimized or replayed (budget spent first)"
	case f.Replays == 0:
		return "not replayed"
	case f.Reproduced >= 2:
		return fmt.Sprintf("reproducible: %d/%d replays", f.Reproduced, f.Replays)
	case f.Reproduced == 1:
		return fmt.Sprintf("flaky: 1/%d replays (reproducible takes 2)", f.Replays)
	}
	return fmt.Sprintf("did not reproduce: 0/%d replays", f.Replays)
}
