// Package gate is forkfuzz's CI gate (`forkfuzz ci`): within a hard
// wall-clock budget it checks the kernel under test, boots it, replays the
// corpus, fuzzes, compares every finding against a baseline kernel and a
// known-issues file, groups findings by root cause, and returns a Result
// that is written as JUnit XML and a versioned JSON summary. Exit status:
// 0 pass, 1 new findings, 2 harness error (or too few programs ran, or the
// gate was interrupted before it could pass the kernel).
//
// The budget is split into phases (docs/ci.md): kernel check; boot (as
// long as it takes, up to the hard stop); corpus replay (at most a quarter
// of what is left); fuzzing with inline minimization (campaign.Run); the
// baseline comparison (a quarter of what is left after corpus replay when
// a baseline is given); reporting (a reserve of 2% of the budget, 2 s to
// 15 s). Every target run goes through a wrapper that refuses runs past
// the phase's stop, so minimization and replays end with the budget, and
// the gate never waits for a phase past the hard stop (budget minus the
// reporting reserve): it reports from what is on disk.
package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// Exit statuses.
const (
	ExitPass     = 0
	ExitFindings = 1
	ExitError    = 2
)

// Finding statuses.
const (
	StatusNew         = "new"          // counts against the kernel under test
	StatusKnown       = "known"        // matched an unexpired known-issues entry
	StatusPreexisting = "pre-existing" // reproduced on the baseline kernel too
)

// Config describes a gate.
type Config struct {
	// Open opens the target running the kernel under test (for QEMU this
	// boots the VMs). OpenBaseline opens the baseline (nil: no baseline).
	Open         func() (agents.Target, error)
	OpenBaseline func() (agents.Target, error)
	// Kernel and Baseline identify the kernels (Target and Release are
	// filled from the opened target when empty).
	Kernel   KernelIdentity
	Baseline *KernelIdentity
	// CheckImages are kernel images (or .configs) to run `kernel check`
	// on first; a missing required capability is a harness error.
	CheckImages []string
	Budget      time.Duration
	Seed        uint64
	// Profile names the generator weights (gen.Profile).
	Profile string
	// Workdir gets findings/ (must hold no earlier findings).
	Workdir string
	// CorpusDirs are directories of regression programs replayed after
	// the embedded seeds; OptionalCorpusDirs are replayed if present (a
	// note says when they are not).
	CorpusDirs         []string
	OptionalCorpusDirs []string
	// ReplayFindings are directories of earlier findings (a workdir, its
	// findings/ or one finding): each minimized.ffz (else program.ffz) is
	// replayed with the corpus.
	ReplayFindings []string
	Known          *KnownIssues
	MinPrograms    int
	// BaselineReplays is how often a reproducer runs on the baseline (3).
	BaselineReplays int
	MinimizeRuns    int
	Corrupt         string
	// ReplayCommand returns the command that runs program file path on
	// the kernel under test (baseline false) or the baseline.
	ReplayCommand func(path string, baseline bool) string
	Log           io.Writer
	Progress      io.Writer
	Now           func() time.Time
}

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
	Name        string        `json:"name"`
	Source      string        `json:"source"` // seeds, a directory's base name, or "finding"
	Path        string        `json:"path"`
	Status      string        `json:"status"` // pass, fail, skipped, harness-error
	Signatures  []string      `json:"signatures,omitempty"`
	Explanation string        `json:"explanation,omitempty"`
	Replay      string        `json:"replay,omitempty"`
	Judged      string        `json:"judged,omitempty"`
	Note        string        `json:"note,omitempty"`
	Duration    time.Duration `json:"-"`
	Seconds     float64       `json:"seconds"`
	prog        *prog.Program
}

// BaselineReplay is what a reproducer did on the baseline kernel.
type BaselineReplay struct {
	Runs       int    `json:"runs"`
	Reproduced int    `json:"reproduced"`
	Command    string `json:"command,omitempty"`
	Note       string `json:"note,omitempty"`
}

// FindingRecord is one finding (one signature) of the gate.
type FindingRecord struct {
	Signature    string `json:"signature"`
	Oracle       string `json:"oracle"`
	Group        string `json:"group"`
	Status       string `json:"status"` // new, known, pre-existing
	StatusReason string `json:"status_reason"`
	KnownIssue   string `json:"known_issue,omitempty"` // file:line of the entry
	Source       string `json:"source"`                // fuzz or corpus:NAME
	Dir          string `json:"dir"`
	// Program and Minimized are files in Dir; Replay the command that
	// runs the reproducer (Minimized, else Program) again.
	Program      string          `json:"program"`
	Minimized    string          `json:"minimized,omitempty"`
	OriginalOps  int             `json:"original_ops"`
	MinimizedOps int             `json:"minimized_ops,omitempty"`
	Replay       string          `json:"replay"`
	Reproduced   int             `json:"reproduced"`
	Replays      int             `json:"replays"`
	Baseline     *BaselineReplay `json:"baseline,omitempty"`
	Explanation  string          `json:"explanation"`
	// Evidence is the checker's first bad (process, view, op, region,
	// page) on the reproducer (nil for target events).
	Evidence *checker.Finding `json:"evidence,omitempty"`

	reproProg *prog.Program
	origProg  *prog.Program
	origEv    *checker.Finding
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
}

// SchemaVersion is the version of the JSON summary (docs/ci.md).
const SchemaVersion = 1

// Result is the outcome of a gate; its JSON form is the summary.
type Result struct {
	Schema        string          `json:"schema"` // "forkfuzz-ci"
	SchemaVersion int             `json:"schema_version"`
	Outcome       string          `json:"outcome"` // pass, fail, error
	ExitCode      int             `json:"exit_code"`
	Reason        string          `json:"reason"`
	Started       time.Time       `json:"started"`
	Elapsed       time.Duration   `json:"-"`
	ElapsedS      float64         `json:"elapsed_seconds"`
	BudgetS       float64         `json:"budget_seconds"`
	Interrupted   bool            `json:"interrupted,omitempty"`
	Seed          uint64          `json:"seed"`
	Profile       string          `json:"profile"`
	Hostname      string          `json:"hostname"`
	Kernel        KernelIdentity  `json:"kernel"`
	Baseline      *KernelIdentity `json:"baseline,omitempty"`
	Workdir       string          `json:"workdir"`
	Programs      int64           `json:"programs"`
	// CorpusPrograms and FuzzPrograms split Programs.
	CorpusPrograms int64           `json:"corpus_programs"`
	FuzzPrograms   int64           `json:"fuzz_programs"`
	Forks          int64           `json:"forks"`
	HarnessErrors  int64           `json:"harness_errors"`
	MinPrograms    int             `json:"min_programs"`
	Judged         string          `json:"judged"`
	Phases         []Phase         `json:"phases"`
	Corpus         []CorpusCase    `json:"corpus"`
	Counts         Counts          `json:"counts"`
	Groups         []Group         `json:"groups"`
	Findings       []FindingRecord `json:"findings"`
	Oracles        []OracleCase    `json:"oracles"`
	Warnings       []string        `json:"warnings,omitempty"`

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
	fmt.Fprintf(&b, "ci: findings: %d signatures in %d groups: %d new, %d known, %d pre-existing groups\n",
		r.Counts.Findings, r.Counts.Groups, r.Counts.NewGroups, r.Counts.KnownGroups, r.Counts.PreexistingGroups)
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "ci:   %s [%s] %s\n", g.ID, g.Status, strings.Join(g.Signatures, ", "))
	}
	for _, f := range r.Findings {
		if f.Status == StatusNew {
			fmt.Fprintf(&b, "ci:   new %s (%s): reproduced %d/%d; %s; replay: %s\n", f.Signature, f.Group, f.Reproduced, f.Replays, f.StatusReason, f.Replay)
		}
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

// EventOracles are the oracles target events name (beside checker.Oracles).
var EventOracles = []string{"executor-crash", "executor-hang", "kernel-panic", "kernel-bug", "kernel-warning",
	"kernel-kasan", "kernel-rss-counter", "kernel-page-table-check", "kernel-hang", "kernel-lost-connection"}

var errBudget = errors.New("gate: budget spent, run refused")

// budgetTarget refuses runs past its stop time (or after stop()), so
// minimization and replays end with the budget.
type budgetTarget struct {
	agents.Target
	stopAt  atomic.Int64 // unix nanoseconds; 0: no stop
	refused atomic.Int64
	// uncorrupted counts programs the test-only corruption did not apply
	// to, run again without it.
	uncorrupted atomic.Int64
	runs        atomic.Int64
	forks       atomic.Int64
}

func (b *budgetTarget) setStop(t time.Time) { b.stopAt.Store(t.UnixNano()) }

func (b *budgetTarget) Parallel() int { return agents.Parallelism(b.Target) }

func (b *budgetTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if s := b.stopAt.Load(); s != 0 && time.Now().UnixNano() >= s {
		b.refused.Add(1)
		return nil, errBudget
	}
	o, err := b.Target.Run(p, opt)
	if err != nil && opt.Corrupt != "" && strings.Contains(err.Error(), "corruption "+opt.Corrupt+": no ") {
		// The test-only corruption has nothing to falsify in p: run it
		// as it is rather than count a harness error.
		b.uncorrupted.Add(1)
		opt.Corrupt = ""
		o, err = b.Target.Run(p, opt)
	}
	if _, ev := agents.AsEvent(err); err == nil || ev {
		b.runs.Add(1)
		b.forks.Add(int64(p.NumForks()))
	}
	return o, err
}

type gate struct {
	cfg         Config
	res         *Result
	start       time.Time
	hard        time.Time // the gate reports from here on
	ctx         context.Context
	tut         *budgetTarget
	store       *campaign.FindingStore
	corpusF     map[string]string // signature -> corpus case name
	reportStart time.Time
	baseCh      chan baselineOpen
	weights     gen.Weights
	mu          sync.Mutex
}

func (g *gate) logf(format string, args ...any) {
	if g.cfg.Log != nil {
		fmt.Fprintf(g.cfg.Log, "ci: "+format+"\n", args...)
	}
}

func (g *gate) now() time.Time {
	if g.cfg.Now != nil {
		return g.cfg.Now()
	}
	return time.Now()
}

// phase runs f as phase name and records it.
func (g *gate) phase(name string, share time.Duration, f func(ph *Phase)) *Phase {
	ph := Phase{Name: name, ShareSeconds: share.Seconds()}
	t0 := time.Now()
	if g.ctx.Err() != nil {
		ph.Skipped = "interrupted"
	} else if time.Now().After(g.hard) {
		ph.Skipped = "budget spent"
	} else {
		g.logf("phase %s (share %v)", name, share.Round(time.Millisecond))
		f(&ph)
	}
	ph.Duration = time.Since(t0)
	ph.Seconds = ph.Duration.Seconds()
	g.res.Phases = append(g.res.Phases, ph)
	if ph.Error != "" && g.res.harnessErr == "" {
		g.res.harnessErr = name + ": " + ph.Error
	}
	g.logf("phase %s done in %v%s", name, ph.Duration.Round(time.Millisecond), func() string {
		switch {
		case ph.Error != "":
			return ": ERROR " + ph.Error
		case ph.Skipped != "":
			return ": skipped, " + ph.Skipped
		}
		return ""
	}())
	return &g.res.Phases[len(g.res.Phases)-1]
}

// openWithin opens a target, giving up at the hard stop or on a signal
// (the half-opened target is closed when it finally returns).
func (g *gate) openWithin(open func() (agents.Target, error)) (agents.Target, error) {
	type res struct {
		t   agents.Target
		err error
	}
	ch := make(chan res, 1)
	go func() {
		t, err := open()
		ch <- res{t, err}
	}()
	timer := time.NewTimer(time.Until(g.hard))
	defer timer.Stop()
	abandon := func() {
		go func() {
			if r := <-ch; r.t != nil {
				r.t.Close()
			}
		}()
	}
	select {
	case r := <-ch:
		return r.t, r.err
	case <-timer.C:
		abandon()
		return nil, fmt.Errorf("the target did not come up within the budget (%v left at the start of boot)", g.cfg.Budget)
	case <-g.ctx.Done():
		abandon()
		return nil, fmt.Errorf("interrupted while booting")
	}
}

// Run runs the gate. It returns a Result in every case (also on an
// interrupt); the caller writes it (WriteFiles) and exits with ExitCode.
func Run(ctx context.Context, cfg Config) *Result {
	if cfg.BaselineReplays <= 0 {
		cfg.BaselineReplays = 3
	}
	if cfg.Profile == "" {
		cfg.Profile = "default"
	}
	host, _ := os.Hostname()
	start := time.Now()
	g := &gate{cfg: cfg, start: start, ctx: ctx, corpusF: map[string]string{}}
	reserve := min(max(cfg.Budget/50, 2*time.Second), 15*time.Second)
	g.hard = start.Add(cfg.Budget - reserve)
	r := &Result{Schema: "forkfuzz-ci", SchemaVersion: SchemaVersion, Started: start.UTC(), BudgetS: cfg.Budget.Seconds(),
		Seed: cfg.Seed, Profile: cfg.Profile, Hostname: host, Kernel: cfg.Kernel, Baseline: cfg.Baseline,
		Workdir: cfg.Workdir, MinPrograms: cfg.MinPrograms}
	g.res = r
	g.logf("budget %v (reporting reserve %v), seed %d, profile %s, workdir %s", cfg.Budget, reserve, cfg.Seed, cfg.Profile, cfg.Workdir)

	defer func() {
		if ctx.Err() != nil {
			r.Interrupted = true
		}
	}()
	// A signal stops every target run at once.
	stopRuns := make(chan struct{})
	defer close(stopRuns)
	go func() {
		select {
		case <-ctx.Done():
			g.mu.Lock()
			if g.tut != nil {
				g.tut.setStop(time.Now())
			}
			g.mu.Unlock()
		case <-stopRuns:
		}
	}()

	g.phase("check", 0, g.check)
	if r.harnessErr == "" && cfg.OpenBaseline != nil && ctx.Err() == nil {
		g.startBaseline()
	}
	defer g.closeBaseline()
	if w, err := gen.Profile(cfg.Profile); err != nil {
		r.harnessErr = "profile: " + err.Error()
	} else {
		g.weights = w
	}
	if r.harnessErr == "" {
		g.phase("boot", time.Until(g.hard), g.boot)
	}
	var judged judge.Tally
	if r.harnessErr == "" {
		share := time.Until(g.hard) / 4
		g.phase("replay", share, func(ph *Phase) { g.replay(ph, share, &judged) })
	}
	var fuzzStats *campaign.Stats
	if r.harnessErr == "" {
		left := time.Until(g.hard)
		baseShare := time.Duration(0)
		if cfg.OpenBaseline != nil {
			baseShare = left / 4
		}
		g.phase("fuzz", left-baseShare, func(ph *Phase) { fuzzStats = g.fuzz(ph, left-baseShare) })
	}
	if fuzzStats != nil {
		r.FuzzPrograms = fuzzStats.Programs
		r.Forks += fuzzStats.Forks
		r.HarnessErrors += fuzzStats.HarnessErrors
		judged.Runs += fuzzStats.Judged.Runs
		judged.Ops += fuzzStats.Judged.Ops
		judged.Views += fuzzStats.Judged.Views
		judged.Pages += fuzzStats.Judged.Pages
		judged.Cells += fuzzStats.Judged.Cells
	}
	r.Programs = r.CorpusPrograms + r.FuzzPrograms
	r.Judged = judged.String()

	// Collecting runs whatever happened (also after a signal): the
	// findings on disk are the gate's record.
	t0 := time.Now()
	g.collect()
	if cfg.OpenBaseline != nil {
		g.phase("baseline", time.Until(g.hard), g.baseline)
	}
	// The evidence for grouping comes last: it only groups, never gates.
	t1 := time.Now()
	deadline := g.hard.Add(reserve / 2)
	if ctx.Err() != nil {
		deadline = time.Now().Add(2 * time.Second) // a signal: report promptly
	}
	enriched := g.enrich(deadline)
	d := time.Since(t1) + t1.Sub(t0) - g.res.phaseDuration("baseline")
	r.Phases = append(r.Phases, Phase{Name: "collect", Duration: d, Seconds: d.Seconds(),
		Note: fmt.Sprintf("%d finding directories read, %d re-judged for evidence", len(r.Findings), enriched)})
	// Reporting runs whatever happened (also after a signal).
	g.reportStart = time.Now()
	if g.tut != nil {
		closeWithin(g.tut.Target, max(time.Until(g.hard.Add(reserve/2)), time.Second))
	}
	g.closeBaseline()
	g.classify()
	g.finish()
	d = time.Since(g.reportStart)
	r.Phases = append(r.Phases, Phase{Name: "report", Duration: d, Seconds: d.Seconds(), ShareSeconds: reserve.Seconds(),
		Note: "closing the target, classifying and grouping findings, writing the files"})
	r.reportStart = g.reportStart
	return r
}

func (g *gate) check(ph *Phase) {
	// The workdir must not hide findings: an earlier run's findings would
	// make the campaign skip their signatures.
	root := filepath.Join(g.cfg.Workdir, "findings")
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				ph.Error = fmt.Sprintf("workdir %s already holds findings of an earlier run (%s); use a fresh --workdir and pass the old one with --replay-findings", g.cfg.Workdir, e.Name())
				return
			}
		}
	}
	var notes []string
	for _, img := range g.cfg.CheckImages {
		rep, err := kernel.Check(img)
		if err != nil {
			ph.Error = fmt.Sprintf("kernel check %s: %v", img, err)
			return
		}
		if !rep.OK() {
			var miss []string
			for _, c := range rep.Caps {
				if c.Required && len(c.Missing) > 0 {
					miss = append(miss, c.Name+": missing "+strings.Join(c.Missing, ", "))
				}
			}
			ph.Error = fmt.Sprintf("kernel check %s: not usable by the gate: %s", img, strings.Join(miss, "; "))
			return
		}
		var opt []string
		for _, c := range rep.Caps {
			if len(c.Missing) > 0 {
				opt = append(opt, c.Name)
			}
		}
		n := fmt.Sprintf("%s: usable (configuration %s)", img, rep.Source)
		if len(opt) > 0 {
			n += "; not covered: " + strings.Join(opt, "; ")
		}
		notes = append(notes, n)
	}
	if len(g.cfg.CheckImages) == 0 {
		ph.Note = "no kernel image to check (the target has none)"
		return
	}
	ph.Note = strings.Join(notes, "\n")
}

func (g *gate) boot(ph *Phase) {
	t, err := g.openWithin(g.cfg.Open)
	if err != nil {
		ph.Error = "opening the target: " + err.Error()
		return
	}
	g.mu.Lock()
	g.tut = &budgetTarget{Target: t}
	if g.ctx.Err() != nil {
		g.tut.setStop(time.Now())
	}
	g.mu.Unlock()
	if g.res.Kernel.Target == "" || g.res.Kernel.Target == "qemu" {
		g.res.Kernel.Target = t.Name()
	}
	if g.res.Kernel.Release == "" {
		g.res.Kernel.Release = t.Name()
	}
	ph.Note = "target " + t.Name()
	g.store = &campaign.FindingStore{Dir: g.cfg.Workdir}
	if err := g.store.Open(); err != nil {
		ph.Error = err.Error()
	}
}

// corpusEntries lists the programs to replay, in order.
func (g *gate) corpusEntries(ph *Phase) []CorpusCase {
	var cs []CorpusCase
	for _, e := range corpus.Seeds() {
		cs = append(cs, CorpusCase{Name: "seeds/" + e.Name, Source: "seeds", Path: "(embedded) corpus/seeds/" + e.Name, prog: e.Prog})
	}
	var notes []string
	addDir := func(dir string, optional bool) {
		if _, err := os.Stat(dir); err != nil && optional {
			notes = append(notes, fmt.Sprintf("corpus directory %s not found, not replayed", dir))
			return
		}
		cs2, err := loadRegress(dir)
		if err != nil {
			notes = append(notes, err.Error())
			if ph.Error == "" && !optional {
				ph.Error = err.Error()
			}
		}
		cs = append(cs, cs2...)
	}
	for _, d := range g.cfg.CorpusDirs {
		addDir(d, false)
	}
	for _, d := range g.cfg.OptionalCorpusDirs {
		addDir(d, true)
	}
	for _, d := range g.cfg.ReplayFindings {
		fs, err := findingPrograms(d)
		if err != nil {
			notes = append(notes, err.Error())
			if ph.Error == "" {
				ph.Error = err.Error()
			}
		}
		cs = append(cs, fs...)
	}
	ph.Note = strings.Join(notes, "\n")
	return cs
}

// loadRegress reads the *.ffz files of a regression directory; a file
// may hold several programs separated by lines "====" (as
// corpus/regress does); each is one case, "DIR/FILE#N" from the second on.
func loadRegress(dir string) ([]CorpusCase, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+corpus.Ext))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	src := filepath.Base(dir)
	var cs []CorpusCase
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lines := strings.SplitAfter(string(b), "\n")
		var part strings.Builder
		first, n := 1, 0
		flush := func(next int) {
			text := part.String()
			part.Reset()
			if strings.TrimSpace(text) != "" {
				name := src + "/" + filepath.Base(f)
				if n > 0 {
					name += fmt.Sprintf("#%d", n+1)
				}
				// Pad with empty lines so errors name the file's line.
				p, err := corpus.ParseFile(f, []byte(strings.Repeat("#\n", first-1)+text))
				if err != nil {
					errs = append(errs, err)
				} else {
					cs = append(cs, CorpusCase{Name: name, Source: src, Path: f, prog: p})
				}
				n++
			}
			first = next
		}
		for i, l := range lines {
			if strings.TrimSpace(l) == "====" {
				flush(i + 2)
				continue
			}
			part.WriteString(l)
		}
		flush(0)
	}
	if len(files) == 0 {
		errs = append(errs, fmt.Errorf("corpus: no %s files in %s", corpus.Ext, dir))
	}
	return cs, errors.Join(errs...)
}

// findingPrograms finds earlier findings under dir (a workdir, its
// findings/ directory, or one finding directory).
func findingPrograms(dir string) ([]CorpusCase, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--replay-findings: %w", err)
	}
	var cs []CorpusCase
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".saving-") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		for _, name := range []string{"minimized.ffz", "program.ffz"} {
			pf := filepath.Join(path, name)
			b, err := os.ReadFile(pf)
			if err != nil {
				continue
			}
			p, err := corpus.ParseFile(pf, b)
			if err != nil {
				errs = append(errs, err)
				break
			}
			cs = append(cs, CorpusCase{Name: "finding/" + filepath.Base(path), Source: "finding", Path: pf, prog: p})
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(cs) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("--replay-findings %s: no finding directory (minimized.ffz or program.ffz) under it", dir))
	}
	return cs, errors.Join(errs...)
}

func (g *gate) replay(ph *Phase, share time.Duration, tally *judge.Tally) {
	stop := time.Now().Add(share)
	cs := g.corpusEntries(ph)
	if ph.Error != "" {
		return
	}
	g.tut.setStop(g.hard)
	ran, failed, skipped := 0, 0, 0
	for i := range cs {
		c := &cs[i]
		if g.ctx.Err() != nil || time.Now().After(stop) {
			c.Status = "skipped"
			c.Note = "corpus replay share of the budget spent"
			if g.ctx.Err() != nil {
				c.Note = "interrupted"
			}
			skipped++
			continue
		}
		t0 := time.Now()
		o, err := g.tut.Run(c.prog, agents.Options{Corrupt: g.cfg.Corrupt})
		v, herr := judge.Judge(c.prog, o, err)
		c.Duration = time.Since(t0)
		c.Seconds = c.Duration.Seconds()
		if herr != nil {
			c.Status, c.Note = "harness-error", herr.Error()
			if errors.Is(herr, errBudget) {
				c.Status, c.Note = "skipped", "budget spent"
				skipped++
				continue
			}
			g.res.HarnessErrors++
			continue
		}
		ran++
		g.res.CorpusPrograms++
		g.res.Forks += int64(c.prog.NumForks())
		tally.Add(v)
		c.Judged = v.Summary()
		if v.OK() {
			c.Status = "pass"
			continue
		}
		failed++
		c.Status = "fail"
		c.Signatures = v.Signatures()
		var ex []string
		for _, is := range v.Issues {
			ex = append(ex, fmt.Sprintf("[%s] %s\n%s", is.Oracle, is.Signature, is.Explanation))
		}
		c.Explanation = strings.Join(ex, "\n\n")
		// Each new signature becomes a finding, saved at once.
		for _, is := range v.Issues {
			if g.store.Seen(is.Signature) {
				continue
			}
			f := &campaign.Finding{Issue: is, Program: c.prog, Observation: o, Minimized: c.prog, MinObs: o, MinIssue: is,
				Judged: v.Summary(), Target: g.tut.Name(), Corrupt: g.cfg.Corrupt, Replays: 1, Reproduced: 1}
			dir, err := g.store.Save(f)
			if err != nil {
				ph.Error = err.Error()
				return
			}
			g.corpusF[is.Signature] = c.Name
			c.Replay = g.replayCmd(filepath.Join(dir, "minimized.ffz"), false)
			g.logf("corpus %s: new finding %s, saved %s", c.Name, is.Signature, dir)
		}
		if c.Replay == "" {
			c.Replay = g.replayCmd(c.Path, false)
		}
	}
	g.res.Corpus = cs
	n := fmt.Sprintf("%d programs: %d ran (%d failed), %d skipped", len(cs), ran, failed, skipped)
	if ph.Note != "" {
		n += "\n" + ph.Note
	}
	ph.Note = n
}

func (g *gate) replayCmd(path string, baseline bool) string {
	if g.cfg.ReplayCommand != nil {
		return g.cfg.ReplayCommand(path, baseline)
	}
	return "forkfuzz exec " + path
}

func (g *gate) fuzz(ph *Phase, share time.Duration) *campaign.Stats {
	// Inline minimization gets a tenth of the share (at most 2 minutes);
	// programs are generated until the share minus that; runs stop at the
	// end of the share.
	minTime := min(share/10, 2*time.Minute)
	stop := time.Now().Add(share)
	dur := share - minTime
	if dur <= 0 {
		ph.Skipped = "no budget left"
		return nil
	}
	g.tut.setStop(stop)
	if g.ctx.Err() != nil {
		g.tut.setStop(time.Now())
	}
	cfg := campaign.Config{Target: g.tut, Seed: g.cfg.Seed, Duration: dur, Workdir: g.cfg.Workdir, Weights: g.weights,
		Log: g.cfg.Log, Progress: g.cfg.Progress, MinimizeRuns: g.cfg.MinimizeRuns, MinimizeTime: minTime, Corrupt: g.cfg.Corrupt}
	type res struct {
		st  *campaign.Stats
		err error
	}
	ch := make(chan res, 1)
	runs0, forks0 := g.tut.runs.Load(), g.tut.forks.Load()
	go func() {
		st, err := campaign.Run(g.ctx, cfg)
		ch <- res{st, err}
	}()
	// Wait for the campaign (a program in flight, the last minimization)
	// until the hard stop, or with a baseline until half its share is
	// gone: comparing findings matters more than the last program.
	waitUntil := g.hard
	if g.cfg.OpenBaseline != nil {
		waitUntil = stop.Add(g.hard.Sub(stop) / 2)
	}
	wait := time.NewTimer(time.Until(waitUntil))
	defer wait.Stop()
	var got res
	select {
	case got = <-ch:
	case <-wait.C:
		g.tut.setStop(time.Now())
		ph.Note = "the campaign did not end by the hard stop; counting runs at the target"
	case <-g.ctx.Done():
		g.tut.setStop(time.Now())
		select {
		case got = <-ch:
		case <-time.After(2 * time.Second):
			ph.Note = "interrupted; the campaign did not end within 2 s; counting runs at the target"
		}
	}
	if got.err != nil {
		ph.Error = got.err.Error()
	}
	if got.st == nil {
		return &campaign.Stats{Programs: g.tut.runs.Load() - runs0, Forks: g.tut.forks.Load() - forks0}
	}
	n := fmt.Sprintf("%d programs, %d forks, %d failing runs, %d new signatures, %d harness errors; generation %v, inline minimization up to %v each",
		got.st.Programs, got.st.Forks, got.st.Events, got.st.Findings, got.st.HarnessErrors, dur.Round(time.Millisecond), minTime.Round(time.Millisecond))
	if r := g.tut.refused.Load(); r > 0 {
		n += fmt.Sprintf("; %d minimization/replay runs refused at the end of the share", r)
	}
	ph.Note = strings.TrimPrefix(ph.Note+"\n"+n, "\n")
	return got.st
}

var reproRE = regexp.MustCompile(`reproduced (\d+)/(\d+) replays`)

// collect reads every finding from the workdir: what is on disk is what
// was seen, whether or not its minimization finished.
func (g *gate) collect() {
	root := filepath.Join(g.cfg.Workdir, "findings")
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		f, err := readFinding(dir)
		if err != nil {
			g.res.Warnings = append(g.res.Warnings, err.Error())
			continue
		}
		f.Source = "fuzz"
		if n, ok := g.corpusF[f.Signature]; ok {
			f.Source = "corpus:" + n
		}
		repro := f.Program
		if f.Minimized != "" {
			repro = f.Minimized
		}
		f.Replay = g.replayCmd(repro, false)
		g.res.Findings = append(g.res.Findings, *f)
	}
	sort.Slice(g.res.Findings, func(i, j int) bool { return g.res.Findings[i].Signature < g.res.Findings[j].Signature })
}

func readFinding(dir string) (*FindingRecord, error) {
	sb, err := os.ReadFile(filepath.Join(dir, "signature"))
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", dir, err)
	}
	f := &FindingRecord{Signature: strings.TrimSpace(string(sb)), Dir: dir, Program: filepath.Join(dir, "program.ffz")}
	f.Oracle, _, _ = strings.Cut(f.Signature, ":")
	if strings.HasPrefix(f.Signature, "kernel-") || strings.HasPrefix(f.Signature, "executor-") {
		f.Oracle, _, _ = strings.Cut(f.Signature, "/")
	}
	f.origProg, err = readProg(f.Program)
	if err != nil {
		return nil, err
	}
	f.OriginalOps = len(f.origProg.Ops)
	f.reproProg = f.origProg
	mp := filepath.Join(dir, "minimized.ffz")
	if p, err := readProg(mp); err == nil {
		f.Minimized, f.reproProg, f.MinimizedOps = mp, p, len(p.Ops)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "report.txt")); err == nil {
		if m := reproRE.FindSubmatch(b); m != nil {
			f.Reproduced, _ = strconv.Atoi(string(m[1]))
			f.Replays, _ = strconv.Atoi(string(m[2]))
		}
		f.Explanation = string(b)
	}
	return f, nil
}

// enrich re-judges the recorded observations of the findings for the
// evidence (the first bad process, op, page) and the explanation of each
// signature, until deadline; it returns how many it did.
func (g *gate) enrich(deadline time.Time) int {
	type key struct{ prog, obs string }
	type val struct {
		is   *checker.Finding
		sigs []string
	}
	cache := map[key]map[string]val{}
	check := func(p *prog.Program, obsPath, sig string) (*checker.Finding, []string) {
		b, err := os.ReadFile(obsPath)
		if err != nil {
			return nil, nil
		}
		h := sha256.Sum256(b)
		k := key{progHash(p), string(h[:])}
		if m, ok := cache[k]; ok {
			return m[sig].is, m[sig].sigs
		}
		m := map[string]val{}
		cache[k] = m
		cv := rejudge(p, b)
		if cv == nil {
			return nil, nil
		}
		var sigs []string
		for i := range cv.Findings {
			sigs = append(sigs, cv.Findings[i].Signature)
		}
		sort.Strings(sigs)
		for i := range cv.Findings {
			f := &cv.Findings[i]
			if _, ok := m[f.Signature]; !ok {
				m[f.Signature] = val{f, sigs}
			}
		}
		return m[sig].is, m[sig].sigs
	}
	n := 0
	for i := range g.res.Findings {
		if time.Now().After(deadline) {
			g.res.Warnings = append(g.res.Warnings, fmt.Sprintf("budget spent: %d of %d findings not re-judged for evidence; grouped by program only", len(g.res.Findings)-n, len(g.res.Findings)))
			break
		}
		f := &g.res.Findings[i]
		n++
		if is, _ := check(f.origProg, filepath.Join(f.Dir, "observation.json"), f.Signature); is != nil {
			f.origEv = is
			f.Oracle = string(is.Oracle)
			f.Explanation = is.String()
			f.Evidence = is
		}
		if f.Minimized != "" {
			if is, sigs := check(f.reproProg, filepath.Join(f.Dir, "minimized-observation.json"), f.Signature); is != nil {
				f.reproSigs = sigs
				f.Evidence = is
				f.Explanation = is.String()
			}
		}
	}
	return n
}

func readProg(path string) (*prog.Program, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("finding: %w", err)
	}
	return corpus.ParseFile(path, b)
}

// rejudge checks a recorded observation of p again (checker.Check, as
// judge.Judge does, without judge's porcupine visualization).
func rejudge(p *prog.Program, b []byte) *checker.Verdict {
	var o obs.Observation
	if json.Unmarshal(b, &o) != nil || len(o.Ops) != len(p.Ops) {
		return nil
	}
	return checker.Check(p, &o)
}

func progHash(p *prog.Program) string {
	s := sha256.Sum256(p.Format())
	return hex.EncodeToString(s[:8])
}

// startBaseline opens the baseline in the background from the start of
// the gate (a QEMU boot takes as long as the kernel under test's), so the
// baseline phase only replays.
func (g *gate) startBaseline() {
	ch := make(chan baselineOpen, 1)
	g.baseCh = ch
	go func() {
		t0 := time.Now()
		t, err := g.cfg.OpenBaseline()
		ch <- baselineOpen{t, err, time.Since(t0)}
	}()
}

type baselineOpen struct {
	t    agents.Target
	err  error
	took time.Duration
}

// closeBaseline closes the baseline target when it comes up (if the
// baseline phase did not take it).
func (g *gate) closeBaseline() {
	if g.baseCh == nil {
		return
	}
	ch := g.baseCh
	g.baseCh = nil
	select {
	case r := <-ch:
		if r.t != nil {
			closeWithin(r.t, 5*time.Second)
		}
	default:
		go func() {
			if r := <-ch; r.t != nil {
				r.t.Close()
			}
		}()
	}
}

// baseline replays every reproducer not already known on the baseline
// kernel, in rounds of one run each, up to BaselineReplays runs; a
// reproducer that shows its finding's signature there once is settled:
// the finding is pre-existing.
func (g *gate) baseline(ph *Phase) {
	var todo []int
	for i := range g.res.Findings {
		f := &g.res.Findings[i]
		if k, _ := g.cfg.Known.Match(f.Signature, g.res.Kernel.Release, g.res.Kernel.Target, g.now()); k != nil {
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		ph.Skipped = "no finding to compare"
		return
	}
	ch := g.baseCh
	g.baseCh = nil
	var bo baselineOpen
	timer := time.NewTimer(time.Until(g.hard))
	defer timer.Stop()
	select {
	case bo = <-ch:
	case <-timer.C:
		bo.err = fmt.Errorf("the baseline did not come up within the budget")
	case <-g.ctx.Done():
		bo.err = fmt.Errorf("interrupted while the baseline booted")
	}
	if bo.err != nil {
		go func() {
			if r := <-ch; r.t != nil {
				r.t.Close()
			}
		}()
		ph.Error = "opening the baseline: " + bo.err.Error()
		return
	}
	bt := bo.t
	defer closeWithin(bt, 5*time.Second)
	if g.res.Baseline != nil && (g.res.Baseline.Target == "" || g.res.Baseline.Target == "qemu") {
		g.res.Baseline.Target = bt.Name()
	}
	if g.res.Baseline != nil && g.res.Baseline.Release == "" {
		g.res.Baseline.Release = bt.Name()
	}
	b := &budgetTarget{Target: bt}
	b.setStop(g.hard)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		select {
		case <-g.ctx.Done():
			b.setStop(time.Now())
		case <-stopWatch:
		}
	}()
	// Distinct reproducers, in the order of their findings.
	type repro struct {
		p     *prog.Program
		sigs  map[string]bool // the signatures of findings it stands for
		shown map[string]int  // signature -> runs that showed it
		runs  int
		note  string
	}
	var order []string
	rs := map[string]*repro{}
	for _, i := range todo {
		f := &g.res.Findings[i]
		h := progHash(f.reproProg)
		r, ok := rs[h]
		if !ok {
			r = &repro{p: f.reproProg, sigs: map[string]bool{}, shown: map[string]int{}}
			rs[h] = r
			order = append(order, h)
		}
		r.sigs[f.Signature] = true
	}
	settled := func(r *repro) bool {
		for s := range r.sigs {
			if r.shown[s] == 0 {
				return false
			}
		}
		return true
	}
	total := 0
rounds:
	for k := 0; k < g.cfg.BaselineReplays; k++ {
		for _, h := range order {
			r := rs[h]
			if settled(r) || r.runs > k {
				continue
			}
			o, err := b.Run(r.p, agents.Options{Corrupt: g.cfg.Corrupt})
			v, herr := judge.Judge(r.p, o, err)
			if herr != nil {
				if errors.Is(herr, errBudget) {
					for _, r := range rs {
						if !settled(r) && r.runs < g.cfg.BaselineReplays {
							r.note = fmt.Sprintf("baseline replays cut short after %d runs: budget spent", r.runs)
						}
					}
					break rounds
				}
				r.note = "harness error on the baseline: " + herr.Error()
				continue
			}
			r.runs++
			total++
			for _, s := range v.Signatures() {
				r.shown[s]++
			}
		}
	}
	for _, i := range todo {
		f := &g.res.Findings[i]
		r := rs[progHash(f.reproProg)]
		repro := f.Program
		if f.Minimized != "" {
			repro = f.Minimized
		}
		f.Baseline = &BaselineReplay{Runs: r.runs, Reproduced: r.shown[f.Signature], Command: g.replayCmd(repro, true), Note: r.note}
	}
	ph.Note = fmt.Sprintf("baseline %s up in %v (booted in the background from the start); %d distinct reproducers of %d findings, %d runs (up to %d each, stopping at the first reproduction)",
		bt.Name(), bo.took.Round(time.Millisecond), len(order), len(todo), total, g.cfg.BaselineReplays)
}

// classify sets every finding's status and groups.
func (g *gate) classify() {
	r := g.res
	now := g.now()
	warned := map[*KnownIssue]bool{}
	for _, e := range g.cfg.Known.Expired(now) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: known issue %q expired on %s and no longer matches", e.Where, e.Pattern, e.Expires.Format("2006-01-02")))
		warned[e] = true
	}
	for i := range r.Findings {
		f := &r.Findings[i]
		k, _ := g.cfg.Known.Match(f.Signature, r.Kernel.Release, r.Kernel.Target, now)
		switch {
		case k != nil:
			f.Status, f.KnownIssue = StatusKnown, k.Where
			f.StatusReason = fmt.Sprintf("known issue (%s): %s", k.Where, k.Reason)
		case f.Baseline != nil && f.Baseline.Reproduced > 0:
			f.Status = StatusPreexisting
			f.StatusReason = fmt.Sprintf("also fails on the baseline (%d/%d replays)", f.Baseline.Reproduced, f.Baseline.Runs)
		default:
			f.Status = StatusNew
			switch {
			case g.cfg.OpenBaseline == nil:
				f.StatusReason = "no baseline given"
			case f.Baseline == nil:
				f.StatusReason = "not replayed on the baseline (budget spent or baseline unavailable)"
			case f.Baseline.Runs == 0:
				f.StatusReason = "not replayed on the baseline: " + f.Baseline.Note
			default:
				f.StatusReason = fmt.Sprintf("passes on the baseline (0/%d replays)", f.Baseline.Runs)
			}
		}
	}
	g.group()
}

// group unites findings whose reproducers are the same program, or whose
// first bad (process, op, region, page) on the same program coincides.
func (g *gate) group() {
	fs := g.res.Findings
	parent := make([]int, len(fs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	why := map[int][]string{}
	owner := map[string]int{}
	unite := func(i int, key, reason string) {
		if j, ok := owner[key]; ok {
			a, b := find(i), find(j)
			if a != b {
				parent[a] = b
				why[i] = append(why[i], reason)
			}
			return
		}
		owner[key] = i
	}
	for i := range fs {
		f := &fs[i]
		if f.Minimized != "" {
			unite(i, "min:"+progHash(f.reproProg), "same minimized program")
		}
		if f.origEv != nil {
			e := f.origEv
			unite(i, fmt.Sprintf("ev:%s:%d:%d:%d:%d", progHash(f.origProg), e.Proc, e.Op, e.Region, e.Page), "same first bad (process, op, page) in the same program")
		}
		if f.Evidence != nil {
			e := f.Evidence
			unite(i, fmt.Sprintf("ev:%s:%d:%d:%d:%d", progHash(f.reproProg), e.Proc, e.Op, e.Region, e.Page), "same first bad (process, op, page) in the same program")
		}
	}
	// A reproducer that shows other findings' signatures too is their
	// reproducer as well.
	bySig := map[string]int{}
	for i := range fs {
		bySig[fs[i].Signature] = i
	}
	for i := range fs {
		for _, s := range fs[i].reproSigs {
			if j, ok := bySig[s]; ok && j != i {
				unite(i, "sig:"+s, "one reproducer shows both signatures")
				unite(j, "sig:"+s, "one reproducer shows both signatures")
			}
		}
	}
	members := map[int][]int{}
	var roots []int
	for i := range fs {
		r := find(i)
		if _, ok := members[r]; !ok {
			roots = append(roots, r)
		}
		members[r] = append(members[r], i)
	}
	// fs is sorted by signature, so roots are in order of their first signature.
	sort.Slice(roots, func(a, b int) bool { return members[roots[a]][0] < members[roots[b]][0] })
	g.res.Groups = nil
	c := &g.res.Counts
	for n, r := range roots {
		gr := Group{ID: fmt.Sprintf("G%d", n+1)}
		whys := map[string]bool{}
		hasNew, hasPre := false, false
		for _, i := range members[r] {
			f := &fs[i]
			f.Group = gr.ID
			gr.Signatures = append(gr.Signatures, f.Signature)
			for _, w := range why[i] {
				if !whys[w] {
					whys[w] = true
					gr.Why = append(gr.Why, w)
				}
			}
			switch f.Status {
			case StatusNew:
				hasNew = true
				c.New++
			case StatusPreexisting:
				hasPre = true
				c.Preexisting++
			default:
				c.Known++
			}
		}
		switch {
		case hasNew:
			gr.Status = StatusNew
			c.NewGroups++
		case hasPre:
			gr.Status = StatusPreexisting
			c.PreexistingGroups++
		default:
			gr.Status = StatusKnown
			c.KnownGroups++
		}
		g.res.Groups = append(g.res.Groups, gr)
	}
	c.Groups = len(g.res.Groups)
	c.Findings = len(fs)
}

// finish fills the oracle cases, the outcome and the exit status.
func (g *gate) finish() {
	r := g.res
	qemu := strings.HasPrefix(r.Kernel.Target, "qemu") || r.Kernel.Image != ""
	var names []string
	for _, o := range checker.Oracles {
		names = append(names, string(o))
	}
	names = append(names, EventOracles...)
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, f := range r.Findings {
		if !have[f.Oracle] {
			have[f.Oracle] = true
			names = append(names, f.Oracle)
		}
	}
	r.Oracles = nil
	for _, n := range names {
		oc := OracleCase{Oracle: n}
		if strings.HasPrefix(n, "kernel-") && !qemu {
			oc.NotApplicable = "only QEMU targets watch a kernel console"
		}
		if strings.HasPrefix(n, "executor-") && strings.HasPrefix(r.Kernel.Target, "sim") {
			oc.NotApplicable = "the simulated kernel has no executor process"
		}
		for _, f := range r.Findings {
			if f.Oracle != n {
				continue
			}
			oc.NotApplicable = ""
			switch f.Status {
			case StatusNew:
				oc.New++
			case StatusKnown:
				oc.Known++
			default:
				oc.Preexisting++
			}
		}
		r.Oracles = append(r.Oracles, oc)
	}
	r.Elapsed = time.Since(g.start)
	r.ElapsedS = r.Elapsed.Seconds()
	if g.ctx.Err() != nil {
		r.Interrupted = true
	}
	if g.tut != nil {
		if n := g.tut.refused.Load(); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d target runs (minimization, replays) were refused because the budget was spent; reproducibility counts may be low", n))
		}
		if n := g.tut.uncorrupted.Load(); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("the test-only corruption %q did not apply to %d runs; they ran again without it", g.cfg.Corrupt, n))
		}
	}
	switch {
	case r.Counts.NewGroups > 0:
		r.Outcome, r.ExitCode = "fail", ExitFindings
		var sigs []string
		for _, gr := range r.Groups {
			if gr.Status == StatusNew {
				sigs = append(sigs, gr.ID+" "+strings.Join(gr.Signatures, ", "))
			}
		}
		r.Reason = fmt.Sprintf("%d new finding group(s): %s", r.Counts.NewGroups, strings.Join(sigs, "; "))
		if r.harnessErr != "" {
			r.Reason += "; also a harness error: " + r.harnessErr
		}
	case r.harnessErr != "":
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, "harness error: "+r.harnessErr
	case r.Interrupted:
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, "interrupted before the budget was spent, no new finding so far: not a pass"
	case r.Programs < int64(r.MinPrograms):
		r.Outcome, r.ExitCode, r.Reason = "error", ExitError, fmt.Sprintf("only %d programs ran, fewer than --min-programs %d", r.Programs, r.MinPrograms)
	default:
		r.Outcome, r.ExitCode = "pass", ExitPass
		r.Reason = fmt.Sprintf("no new finding in %d programs", r.Programs)
		if r.Counts.Findings > 0 {
			r.Reason += fmt.Sprintf(" (%d known, %d pre-existing findings, in %d groups)", r.Counts.Known, r.Counts.Preexisting, r.Counts.Groups)
		}
	}
}

// closeWithin closes t, waiting at most d (a VM stuck in a run must not
// hold the gate past its budget).
func closeWithin(t agents.Target, d time.Duration) {
	done := make(chan struct{})
	go func() {
		t.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}
