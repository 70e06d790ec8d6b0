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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	pages "github.com/forkfuzz/forkfuzz/campaign/report"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/version"
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
	// StatusHarnessFlake: an executor death or hang that reproduced 0/N
	// on replays with no kernel report on the console (harnessFlake).
	StatusHarnessFlake = "harness-flake"
	// StatusUnconfirmed: harness trouble (an executor death or hang, a
	// lost connection, a VM hang, no kernel report on the console) that
	// was never replayed: the gate can neither blame the kernel nor
	// clear it, and errs (exit 2).
	StatusUnconfirmed = "unconfirmed"
)

// Config describes a gate.
type Config struct {
	// Open opens the target running the kernel under test (for QEMU this
	// boots the VMs). OpenBaseline opens the baseline (nil: no baseline).
	Open         func() (agents.Target, error)
	OpenBaseline func() (agents.Target, error)
	// OpenFresh opens one target for a fresh-VM replay (nil: Open); for
	// QEMU one VM, whatever the pool's size.
	OpenFresh func() (agents.Target, error)
	// Kernel and Baseline identify the kernels (Target and Release are
	// filled from the opened target when empty).
	Kernel   KernelIdentity
	Baseline *KernelIdentity
	// CheckImages are kernel images (or .configs) to run `kernel check`
	// on first; a missing required capability is a harness error.
	CheckImages []string
	Budget      time.Duration
	Seed        uint64
	// Guided lets what the fuzz phase's runs reached (KCOV edges, memory
	// states) guide its mutation; by default it is blind, as the mutation
	// benchmark found blind campaigns at least as fast (docs/coverage.md).
	Guided bool
	// CoverEvery is campaign.Config.CoverEvery for the fuzz phase (0:
	// campaign's default: every program when Guided, one in
	// campaign.DefaultBlindCoverEvery when blind). A finding is replayed
	// (confirm, baseline, fresh) the way the run that showed it was, with
	// or without coverage (its seed file says "kcov off"); corpus
	// replays collect none unless an earlier finding's run did; a fix's
	// reproducer runs as its finding ran (FixCase.NoCover).
	CoverEvery int
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
	// MinFuzzPrograms: fewer programs in the fuzz phase is exit 2 (a
	// gate whose boot and corpus took its budget tested the corpus
	// alone); 0 lets a gate pass on its corpus.
	MinFuzzPrograms int
	// BaselineReplays is how often a reproducer runs on the baseline (3).
	BaselineReplays int
	// Fixes are reproducers of bugs the kernel under test claims to fix
	// (fixes.go; needs OpenBaseline); each runs FixRuns times (5) on
	// each kernel.
	Fixes   []FixCase
	FixRuns int
	// MaxHarnessFlakes is how many runs with an unreproduced executor
	// death or hang the gate tolerates (reported, not gated); more make
	// it exit 2: the harness is unhealthy.
	MaxHarnessFlakes int
	MinimizeRuns     int
	// ProgramTimeout is the target's time for one program (0: unknown);
	// a replay that decides a hang gets at least twice as long.
	ProgramTimeout time.Duration
	Corrupt        string
	// ReplayCommand returns the command that runs program file path on
	// the kernel under test (baseline false) or the baseline, without
	// kernel coverage or census as mode says (as the run that showed it).
	ReplayCommand func(path string, baseline bool, mode RunMode) string
	Log           io.Writer
	Progress      io.Writer
	// ProgressLines prints progress as plain lines (not a terminal).
	ProgressLines bool
	Now           func() time.Time
	// Start is when the budget started (zero: when Run is called); the
	// CLI sets it before identifying the images, so that counts too.
	Start time.Time
}

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
	// trouble is the harness trouble its runs showed.
	trouble troubleLog
}

func (b *budgetTarget) setStop(t time.Time) { b.stopAt.Store(t.UnixNano()) }

func (b *budgetTarget) Parallel() int { return agents.Parallelism(b.Target) }

// Unwrap is the target the budget wraps (agents.Unwrap: the campaign sees
// the kernel image and the fork implementation behind it).
func (b *budgetTarget) Unwrap() agents.Target { return b.Target }

// TakePending passes on the events the wrapped target saw while it was
// opened (a kernel that broke on the calibration fork).
func (b *budgetTarget) TakePending() []agents.Pending {
	if p, ok := b.Target.(agents.PendingEvents); ok {
		return p.TakePending()
	}
	return nil
}

func (b *budgetTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if s := b.stopAt.Load(); s != 0 && time.Now().UnixNano() >= s {
		b.refused.Add(1)
		return nil, errBudget
	}
	t0 := time.Now()
	o, err := b.Target.Run(p, opt)
	if ev, ok := agents.AsEvent(err); ok {
		if trouble, _ := troubleKind(ev.Signature()); trouble {
			b.trouble.add(ev.Signature(), time.Since(t0))
		}
	}
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
	baseT       agents.Target // the baseline, once taken (takeBaseline)
	baseOpen    baselineOpen
	baseErr     error
	fixStop     time.Time // the fixes phase's stop
	weights     gen.Weights
	// sigRuns counts failing runs per signature (corpus and fuzzing).
	sigRuns map[string]int64
	// tally is what the verdicts of every run rested on.
	tally judge.Tally
	mu    sync.Mutex
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
	return g.openBy(open, g.hard)
}

// openBy is openWithin with its own stop.
func (g *gate) openBy(open func() (agents.Target, error), stop time.Time) (agents.Target, error) {
	type res struct {
		t   agents.Target
		err error
	}
	ch := make(chan res, 1)
	go func() {
		t, err := open()
		ch <- res{t, err}
	}()
	timer := time.NewTimer(time.Until(stop))
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
		return nil, fmt.Errorf("the target did not come up before the gate's hard stop (budget %v)", g.cfg.Budget)
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
	if cfg.FixRuns <= 0 {
		cfg.FixRuns = 5
	}
	if cfg.Profile == "" {
		cfg.Profile = "default"
	}
	host, _ := os.Hostname()
	start := cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	g := &gate{cfg: cfg, start: start, ctx: ctx, corpusF: map[string]string{}, sigRuns: map[string]int64{}}
	reserve := min(max(cfg.Budget/50, 2*time.Second), 15*time.Second)
	g.hard = start.Add(cfg.Budget - reserve)
	r := &Result{Schema: "forkfuzz-ci", SchemaVersion: SchemaVersion, Version: version.String(), Started: start.UTC(), BudgetS: cfg.Budget.Seconds(),
		Seed: cfg.Seed, Profile: cfg.Profile, Hostname: host, Kernel: cfg.Kernel, Baseline: cfg.Baseline,
		Workdir: cfg.Workdir, MinPrograms: cfg.MinPrograms, MinFuzzPrograms: cfg.MinFuzzPrograms, Fixes: append([]FixCase(nil), cfg.Fixes...)}
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

	if d := time.Since(start); !cfg.Start.IsZero() {
		r.Phases = append(r.Phases, Phase{Name: "identify", Duration: d, Seconds: d.Seconds(),
			Note: "parsing flags, sha256 and release of the kernel images"})
	}
	// One gate (or campaign) per workdir, from its first write (the
	// campaign's own lock is shared within the process).
	if cfg.Workdir != "" {
		unlock, err := campaign.LockWorkdir(cfg.Workdir)
		if err != nil {
			r.harnessErr = err.Error()
		} else {
			defer unlock()
		}
	}
	if r.harnessErr == "" {
		g.phase("check", 0, g.check)
	}
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
	if r.harnessErr == "" && cfg.OpenBaseline != nil && len(cfg.Fixes) > 0 {
		// The fix claims before fuzzing: the question the patch's author
		// asked gets its runs, and fuzzing has the rest.
		share := g.fixesShare(time.Until(g.hard))
		g.phase("fixes", share, func(ph *Phase) { g.fixes(ph, time.Now().Add(share)) })
	}
	if r.harnessErr == "" {
		g.fuzzPhase(&judged)
	}
	r.Programs = r.CorpusPrograms + r.FuzzPrograms
	r.Judged = judged.String()
	r.Tally = judged
	g.tally = judged

	// Collecting runs whatever happened (also after a signal): the
	// findings on disk are the gate's record.
	t0 := time.Now()
	g.collect()
	if g.tut != nil {
		g.phase("confirm", time.Until(g.hard), g.confirm)
	}
	// The baseline before the fresh validation: it decides the verdict
	// (new or pre-existing), the fresh replays only its wording, and a
	// finding the baseline shows needs no fresh replay.
	if cfg.OpenBaseline != nil {
		g.phase("baseline", time.Until(g.hard), g.baseline)
	}
	if g.tut != nil {
		g.phase("fresh", time.Until(g.hard), g.fresh)
	}
	// The evidence for grouping comes last: it only groups, never gates.
	t1 := time.Now()
	deadline := g.hard.Add(reserve / 2)
	if ctx.Err() != nil {
		deadline = time.Now().Add(500 * time.Millisecond) // a signal: report promptly
	}
	enriched := g.enrich(deadline)
	d := time.Since(t1) + t1.Sub(t0) - g.res.phaseDuration("baseline") - g.res.phaseDuration("confirm") - g.res.phaseDuration("fresh")
	r.Phases = append(r.Phases, Phase{Name: "collect", Duration: d, Seconds: d.Seconds(),
		Note: fmt.Sprintf("%d finding directories read, %d re-judged for evidence", len(r.Findings), enriched)})
	// Reporting runs whatever happened (also after a signal).
	g.reportStart = time.Now()
	if g.tut != nil {
		d := max(time.Until(g.hard.Add(reserve/2)), time.Second)
		if ctx.Err() != nil {
			d = 3 * time.Second // a signal: CI kills soon after
		}
		closeWithin(g.tut.Target, min(d, 30*time.Second))
	}
	g.closeBaseline()
	g.classify()
	g.finish()
	g.writeMails()
	d = time.Since(g.reportStart)
	r.Phases = append(r.Phases, Phase{Name: "report", Duration: d, Seconds: d.Seconds(), ShareSeconds: reserve.Seconds(),
		Note: "closing the target, classifying and grouping findings, writing the files"})
	r.reportStart = g.reportStart
	return r
}

func (g *gate) check(ph *Phase) {
	// The gate judges only what it saw: an earlier run's findings (a
	// persistent CI workspace) are moved aside, kept, and not judged.
	moved, err := moveEarlierFindings(g.cfg.Workdir, g.now())
	if err != nil {
		ph.Error = err.Error()
		return
	}
	var notes []string
	if moved != "" {
		w := fmt.Sprintf("the workdir held an earlier run's findings: moved to %s and not judged (pass --replay-findings %s to replay them)", moved, moved)
		g.res.Warnings = append(g.res.Warnings, w)
		notes = append(notes, w)
	}
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
		notes = append(notes, "no kernel image to check (the target has none)")
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
	// A VM target booted without --kernel (Debian's kernel) says which
	// image it booted: the verdict names it.
	if img, ok := agents.KernelImageOf(t); ok && g.res.Kernel.Image == "" && img.KernelImage() != "" {
		k := &g.res.Kernel
		k.Image = img.KernelImage()
		k.SHA256, _ = kernel.FileSHA256(k.Image)
		if rel, ver, _ := strings.Cut(img.KernelRelease(), " "); rel != "" {
			k.Release = rel
			if k.Version == "" {
				k.Version = ver
			}
		}
	}
	if g.res.Kernel.Release == "" {
		g.res.Kernel.Release = t.Name()
	}
	ph.Note = "target " + t.Name()
	g.store = &campaign.FindingStore{Dir: g.cfg.Workdir, Pages: pages.Files}
	if err := g.store.Open(); err != nil {
		ph.Error = err.Error()
	}
}

func (g *gate) replayCmd(path string, baseline bool, mode RunMode) string {
	if g.cfg.ReplayCommand != nil {
		return g.cfg.ReplayCommand(path, baseline, mode)
	}
	return strings.Join(append(append([]string{"forkfuzz", "exec"}, mode.Flags()...), path), " ")
}

// fuzzPhase runs the fuzz phase on what is left but the baseline's share
// (the fresh validation's time is fuzzed unless a finding needs it) and
// adds its counts to the result and judged.
func (g *gate) fuzzPhase(judged *judge.Tally) {
	left := time.Until(g.hard)
	baseShare := time.Duration(0)
	if g.cfg.OpenBaseline != nil {
		baseShare = left / 4
	}
	var st *campaign.Stats
	g.phase("fuzz", left-baseShare, func(ph *Phase) { st = g.fuzz(ph, left-baseShare, freshShare(left)) })
	if st == nil {
		return
	}
	r := g.res
	r.FuzzPrograms = st.Programs
	r.Forks += st.Forks
	r.HarnessErrors += st.HarnessErrors
	judged.Merge(st.Judged)
	r.Spent = st.Spent
	for sig, n := range st.SignatureRuns {
		g.sigRuns[sig] += n
	}
}

func (g *gate) fuzz(ph *Phase, share, fresh time.Duration) *campaign.Stats {
	// Inline minimization gets a tenth of the share (at most 2 minutes).
	// Programs are generated until the end of the share, or, once a
	// finding was saved, until the time left holds its minimization and
	// the fresh validation (fresh): a clean gate fuzzes all its budget
	// but a wind-down for the last program. Runs stop at the end of the
	// share.
	minTime := min(share/10, 2*time.Minute)
	stop := time.Now().Add(share)
	dur := share - min(share/20, 15*time.Second)
	if share-minTime-fresh <= 0 {
		ph.Skipped = "no budget left"
		return nil
	}
	endGen := make(chan struct{})
	endGenAt := stop.Add(-minTime - fresh)
	g.tut.setStop(stop)
	if g.ctx.Err() != nil {
		g.tut.setStop(time.Now())
	}
	cfg := campaign.Config{Target: g.tut, Seed: g.cfg.Seed, Duration: dur, Workdir: g.cfg.Workdir, Weights: g.weights, FindingPages: pages.Files,
		Log: g.cfg.Log, Progress: g.cfg.Progress, ProgressLines: g.cfg.ProgressLines, ProgressEvery: progressEvery(g.cfg.ProgressLines), MinimizeRuns: g.cfg.MinimizeRuns,
		MinimizeTime: minTime, Corrupt: g.cfg.Corrupt, TargetArgs: g.res.Kernel.Flags, Kernel: g.kernelID(), Stop: endGen,
		Blind: !g.cfg.Guided, CoverEvery: g.cfg.CoverEvery}
	type res struct {
		st  *campaign.Stats
		err error
	}
	ch := make(chan res, 1)
	runs0, forks0 := g.tut.runs.Load(), g.tut.forks.Load()
	// The campaign stops taking programs at the end of the share: past it
	// every run is refused, and refusals in a row would read as harness
	// errors (an inline minimization that ran long used to end the gate
	// with "5 harness errors in a row" and exit 2).
	ctx, cancel := context.WithDeadline(g.ctx, stop)
	defer cancel()
	// A campaign abandoned at the hard stop may still be minimizing a
	// finding: sealed, it cannot change the findings the report lists.
	cfg.Seal = campaign.NewSeal()
	go func() {
		st, err := campaign.Run(ctx, cfg)
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
	// Harness trouble (an executor or VM that stopped answering) is
	// decided by replays after the campaign: once it is seen, the
	// campaign ends early enough to leave their time (confirm).
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var got res
	early := ""
	for waiting := true; waiting; {
		select {
		case <-tick.C:
			if endGen != nil && time.Now().After(endGenAt) && g.foundAny() {
				g.logf("a finding was saved: generation ends %v before the share's end, for minimization and fresh validation", time.Until(stop).Round(time.Second))
				close(endGen)
				endGen = nil
			}
			if endGen == nil && ctx.Err() == nil && time.Now().After(stop.Add(-fresh)) {
				// The rest of the share is the fresh validation's.
				g.tut.setStop(time.Now())
				cancel()
			}
			if need := g.confirmNeed(); need > 0 && ctx.Err() == nil && time.Now().Add(need).After(stop) {
				early = fmt.Sprintf("ended %v early: harness trouble was seen, and its replays need about %v", time.Until(stop).Round(time.Second), need.Round(time.Second))
				g.logf("harness trouble seen: campaign %s", early)
				cancel()
			}
			continue
		case got = <-ch:
		case <-wait.C:
			g.tut.setStop(time.Now())
			cfg.Seal.Close()
			ph.Note = "the campaign did not end by the hard stop; counting runs at the target; its findings on disk are as they were then"
		case <-g.ctx.Done():
			g.tut.setStop(time.Now())
			select {
			case got = <-ch:
			case <-time.After(time.Second):
				cfg.Seal.Close()
				ph.Note = "interrupted; the campaign did not end within 1 s; counting runs at the target; its findings on disk are as they were then"
			}
		}
		waiting = false
	}
	if early != "" {
		ph.Note = strings.TrimPrefix(ph.Note+"\n"+early, "\n")
	}
	if got.err != nil {
		ph.Error = got.err.Error()
	}
	if got.st == nil {
		return &campaign.Stats{Programs: g.tut.runs.Load() - runs0, Forks: g.tut.forks.Load() - forks0}
	}
	n := fmt.Sprintf("%d programs, %d forks, %d failing runs, %d new signatures, %d harness errors; generation %v, inline minimization up to %v each",
		got.st.Programs, got.st.Forks, got.st.Events, got.st.Findings, got.st.HarnessErrors, dur.Round(time.Millisecond), minTime.Round(time.Millisecond))
	if got.st.Refused > 0 {
		n += fmt.Sprintf("; %d programs refused by the target (too few free hugetlb pages), not run", got.st.Refused)
	}
	if r := g.tut.refused.Load(); r > 0 {
		n += fmt.Sprintf("; %d minimization/replay runs refused at the end of the share", r)
	}
	ph.Note = strings.TrimPrefix(ph.Note+"\n"+n, "\n")
	return got.st
}

// foundAny says whether the campaign saved a finding (a directory under
// WORKDIR/findings: earlier runs' were moved aside at the start).
func (g *gate) foundAny() bool {
	ents, _ := os.ReadDir(filepath.Join(g.cfg.Workdir, "findings"))
	for _, e := range ents {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// kernelID is the kernel under test as the campaign's findings name it.
func (g *gate) kernelID() campaign.KernelID {
	k := g.res.Kernel
	switch {
	case k.Image != "":
		return campaign.KernelID{Image: k.Image, SHA256: k.SHA256, Uname: strings.TrimSpace(k.Release + " " + k.Version)}
	case strings.HasPrefix(k.Target, "sim"):
		return campaign.KernelID{Simulated: k.Target}
	case k.Target == "native":
		return campaign.HostKernel()
	}
	return campaign.KernelID{Uname: k.Release}
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

// moveEarlierFindings moves WORKDIR/findings aside to
// WORKDIR/earlier/findings-TIME when it holds any finding directory, and
// returns where ("" when there was nothing to move).
func moveEarlierFindings(workdir string, now time.Time) (string, error) {
	root := filepath.Join(workdir, "findings")
	ents, err := os.ReadDir(root)
	if err != nil {
		return "", nil
	}
	held := false
	for _, e := range ents {
		held = held || !strings.HasPrefix(e.Name(), ".")
	}
	if !held {
		return "", nil
	}
	if err := os.MkdirAll(filepath.Join(workdir, "earlier"), 0o755); err != nil {
		return "", fmt.Errorf("workdir %s holds an earlier run's findings and they cannot be moved aside: %w", workdir, err)
	}
	base := filepath.Join(workdir, "earlier", "findings-"+now.UTC().Format("20060102T150405Z"))
	dst := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(dst); os.IsNotExist(err) {
			break
		}
		dst = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(root, dst); err != nil {
		return "", fmt.Errorf("workdir %s holds an earlier run's findings and they cannot be moved aside: %w", workdir, err)
	}
	return dst, nil
}

// progressEvery is how often the campaign prints progress: every second
// on a terminal (rewritten in place), every 10 s as lines in a log.
func progressEvery(lines bool) time.Duration {
	if lines {
		return 10 * time.Second
	}
	return time.Second
}
