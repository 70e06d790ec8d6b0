// Package campaign runs a fuzzing campaign against one target: it generates
// and mutates programs from a logged seed, runs them, judges every
// observation with the oracles, and saves each new finding (deduplicated by
// signature) with a minimized reproducer.
package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/version"
)

// Config describes a campaign.
type Config struct {
	Target   agents.Target
	Seed     uint64
	Duration time.Duration // 0: no time limit
	Programs int           // 0: no program limit
	Workdir  string        // findings go to Workdir/findings
	Weights  gen.Weights
	// Progress receives a status line every ProgressEvery (nil: none).
	Progress      io.Writer
	ProgressEvery time.Duration
	// Log receives one line per event worth keeping (seed, findings).
	Log io.Writer
	// MinimizeRuns and MinimizeTime bound the target runs and the time
	// spent minimizing one finding (0: 300 runs, no time bound).
	MinimizeRuns int
	MinimizeTime time.Duration
	// Corrupt is passed to the executor (test-only; see executor.Corruptions).
	Corrupt string
	// TargetArgs are the `forkfuzz exec` flags that select the target as
	// this campaign runs it; findings carry them in their replay command.
	TargetArgs []string
	// Kernel identifies the kernel under test (findings add what the
	// executor observed).
	Kernel KernelID
	// ProgressLines prints the status as plain lines (for a log file or a
	// CI console) instead of one line rewritten with a carriage return.
	ProgressLines bool
	// MaxHarnessErrors aborts the campaign after this many consecutive
	// harness errors (default 5).
	MaxHarnessErrors int
	// Corpus is the directory that keeps the mutation pool across runs
	// (resume.go; "": the pool lives in memory only).
	Corpus string
	// OnSample is called with every stats sample (stats.go), e.g. to
	// export metrics.
	OnSample func(Sample)
	// Blind: mutation ignores kernel coverage (it is still measured and
	// kept in the corpus directory). See coverage.go.
	Blind bool
	// NoStates: guidance by KCOV edges only; runs' memory states
	// (cover.StateSignal) are neither kept nor fed back, to measure
	// what they add.
	NoStates bool
	// CoverCSV, when set, receives the coverage after every program
	// (cover.Open).
	CoverCSV string
	// SeedCorpus, when set, is a kept coverage corpus (a corpus
	// directory, or a workdir holding one per kernel build) copied into
	// this campaign's corpus when that is empty (cover.Seed): the
	// campaign starts from it instead of from nothing.
	SeedCorpus string
	// NoCover: targets do not collect kernel coverage at all (to measure
	// what collecting costs).
	NoCover bool
	// CoverEvery: the targets collect kernel coverage (KCOV) for one
	// program in CoverEvery (0: DefaultGuidedCoverEvery of a guided
	// campaign's fresh programs, and every corpus mutation (CoverFor);
	// DefaultBlindCoverEvery of a blind one, which only reports it; 1:
	// every program). Collecting costs 1.3-1.5x a program's time on the
	// reference kernel under TCG (docs/throughput.md). NoCover: none.
	CoverEvery int
	// CensusEvery: the targets take their page census around forks (what
	// the kernel held at each fork: evidence, never judged) for one
	// program in CensusEvery (0: DefaultCensusEvery; 1: every program;
	// negative: never), and for every corpus mutation of a guided
	// campaign with memory states (CensusFor). It costs about a tenth of
	// a program's time on the reference kernel under TCG
	// (docs/throughput.md).
	CensusEvery int
	// DigestsFirst: views carry words only where threads race and page
	// digests elsewhere (agents.Options.DigestsFirst); a run whose
	// verdict needs the words runs again with them (runJudged). Off by
	// default: it saved nothing measurable (docs/throughput.md).
	DigestsFirst bool
	// FindingPages returns the pages written beside every finding
	// (report.Files: report.html, report.json); nil: none.
	FindingPages func(f *Finding) map[string][]byte
	// StopAfterFindings ends the campaign (no new programs; findings seen
	// are still minimized) once it has this many new findings (0: never).
	// The kernel mutation benchmark stops at the first.
	StopAfterFindings int
	// Stop, when set and closed, ends generation as Duration does (no new
	// programs; findings seen are still minimized): a gate ends fuzzing
	// early once a finding needs its time after the campaign.
	Stop <-chan struct{}
	// Seal, when set, ends the campaign's writes to its finding
	// directories once closed (Seal.Close): a gate that reported and
	// abandons a campaign still running must not have findings change
	// under its report.
	Seal *Seal
}

// Stats summarize a campaign.
type Stats struct {
	Programs int64
	Forks    int64
	Findings int64 // new unique signatures
	Events   int64 // failing runs, including duplicates
	// Known counts the signatures this campaign saw that were already saved
	// in the workdir by an earlier run; KnownDirs are their directories.
	// They are not saved again but still count as failures.
	Known     int64
	KnownDirs []string
	// Unconfirmed are the new findings that are harness trouble which did
	// not come back on replays (HarnessTrouble): saved, but not counted
	// against the kernel; the reason follows each signature.
	Unconfirmed   []string
	HarnessErrors int64
	// Refused counts the programs the target refused to run (a hugetlb
	// region without free huge pages: agents.Refused); not harness errors.
	Refused int64
	Elapsed time.Duration
	// Judged is what the verdicts rested on, over every program.
	Judged judge.Tally
	// SignatureRuns counts the failing runs per signature (a signature
	// is saved once but may fail many runs).
	SignatureRuns map[string]int64
	Saved         []string // finding directories
	// StatsErrors counts the samples that could not be written to
	// StatsFile; StatsError says how many, where and the first error.
	StatsErrors int
	StatsError  string
	stats       *statsLog
	// Cover is the coverage phrase of the summary; CoverCounts its
	// numbers, CoverDir the corpus directory (empty: no coverage).
	Cover       string
	CoverCounts cover.Counts
	CoverDir    string
	// FirstAt and FirstProgram say when the first new finding came: time
	// since the start and programs run up to and including it (0: none).
	// First is that finding after minimizing (nil: none).
	FirstAt      time.Duration
	FirstProgram int64
	First        *Finding
	// Spent is where the time went (by phase, summed over programs).
	Spent *TimeSpent
	spent spent
}

// SeedRule says how a campaign with seed s draws its programs, for logs.
func SeedRule(s uint64) string {
	return fmt.Sprintf("fresh program k uses campaign.ProgramSeed(%d, k); when guided, the corpus mutation at program i uses campaign.ProgramSeed(%d, i); every finding names its program's seed", s, CorpusSeed(s))
}

// ProgramSeed is the seed of program i of a campaign with seed s. A program
// is generated or mutated from rand.New(rand.NewPCG(ProgramSeed(s, i), s)).
// In a blind campaign program i is fresh program i; a guided one draws
// some programs from its corpus (CorpusSeed), and its fresh programs go
// on in order between them (Origin).
func ProgramSeed(s uint64, i int64) uint64 {
	x := s + uint64(i)*0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// ProgramRand returns the random source of program i.
func ProgramRand(s uint64, i int64) *rand.Rand {
	return rand.New(rand.NewPCG(ProgramSeed(s, i), s))
}

// NewProgram produces program i of the campaign from the pool of earlier
// programs: mostly fresh ones, sometimes mutations and splices.
func NewProgram(s uint64, i int64, pool []*prog.Program, w gen.Weights) *prog.Program {
	p, _ := NewProgramParent(s, i, pool, w)
	return p
}

// PoolMax bounds the pool of programs that mutations draw on.
const PoolMax = 256

// Pool is what mutations draw on: the seed corpus, then every program that
// ran, up to PoolMax; past that, program i replaces slot i%PoolMax.
type Pool struct{ Progs []*prog.Program }

// NewPool returns a pool holding the seed corpus.
func NewPool() *Pool {
	p := &Pool{}
	for _, e := range corpus.Seeds() {
		p.Progs = append(p.Progs, e.Prog)
	}
	return p
}

// Add puts program i, which ran, into the pool and returns its slot.
func (p *Pool) Add(i int64, q *prog.Program) int {
	if len(p.Progs) < PoolMax {
		p.Progs = append(p.Progs, q)
		return len(p.Progs) - 1
	}
	slot := int(i) % PoolMax
	p.Progs[slot] = q
	return slot
}

// Set puts q into slot (a pool restored from storage), growing the pool
// as needed; it ignores slots out of range.
func (p *Pool) Set(slot int, q *prog.Program) {
	if slot < 0 || slot >= PoolMax {
		return
	}
	for len(p.Progs) <= slot {
		p.Progs = append(p.Progs, q)
	}
	p.Progs[slot] = q
}

// ArenaWeights returns w for campaigns on t: under a fork implementation
// that defers the copy (--fork-impl async-fork, ...), generated programs
// keep the arena at the top (prog.ArenaTop), with a note saying so. With
// the program's VMAs copied before the Go runtime's, the 6.1 Async-fork
// port had finished copying the program's PMDs before the executor could
// read its evidence (docs/rollback.md, "Where Go puts its heap"): such a
// fork would look eager, a harness error. Programs a campaign reads with
// "arena low" (corpus, mutation of them) still run low.
func ArenaWeights(t agents.Target, w gen.Weights) (gen.Weights, string) {
	ft, ok := t.(*agents.ForkImplTarget)
	if !ok {
		return w, ""
	}
	return ArenaWeightsFor(ft.Profile, w)
}

// ArenaWeightsFor is ArenaWeights for agents that fork with profile (a
// coordinator's --fork-impl: it does not hold their targets).
func ArenaWeightsFor(profile string, w gen.Weights) (gen.Weights, string) {
	if !obs.DeferredProfile(profile) || (w.ArenaLowProb == 0 && w.ArenaLowAimedProb == 0) {
		return w, ""
	}
	w.ArenaLowProb, w.ArenaLowAimedProb = 0, 0
	return w, fmt.Sprintf("--fork-impl %s: generated programs keep their regions at the top of the address space (no \"arena low\"): a fork that copies them before the runtime's memory looks eager there", profile)
}

// HugetlbWeights returns w for campaigns on t: generated programs may
// have hugetlb regions when t has free 2 MiB hugetlb pages
// (agents.HugetlbPages; w.HugetlbFree already set is kept), with a note
// saying how many.
func HugetlbWeights(t agents.Target, w gen.Weights) (gen.Weights, string) {
	if w.HugetlbFree == 0 {
		w.HugetlbFree = agents.HugetlbPages(t)
	}
	if w.HugetlbFree < 4 || w.HugetlbProb <= 0 {
		return w, ""
	}
	return w, fmt.Sprintf("the target has %d free 2 MiB hugetlb pages: %.0f%% of generated programs get a hugetlb region", w.HugetlbFree, 100*w.HugetlbProb)
}

// FileWeights returns w for campaigns on t: generated programs may have
// file regions on the file systems t has (agents.FileSystemsOf;
// w.FileSystems already set is kept), with a note naming them.
func FileWeights(t agents.Target, w gen.Weights) (gen.Weights, string) {
	if len(w.FileSystems) == 0 {
		w.FileSystems = agents.FileSystemsOf(t)
	}
	if len(w.FileSystems) == 0 || w.FileProb <= 0 {
		return w, ""
	}
	names := make([]string, len(w.FileSystems))
	for i, f := range w.FileSystems {
		names[i] = f.String()
	}
	return w, fmt.Sprintf("the target has %s: %.0f%% of generated programs get a file region on one of them", strings.Join(names, " and "), 100*w.FileProb)
}

// Run runs the campaign until ctx ends or a limit is reached.
func Run(ctx context.Context, cfg Config) (*Stats, error) {
	if cfg.Target == nil {
		return nil, errors.New("campaign: no target")
	}
	if cfg.MaxHarnessErrors <= 0 {
		cfg.MaxHarnessErrors = DefaultMaxHarnessErrors
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	var arenaNote string
	cfg.Weights, arenaNote = ArenaWeights(cfg.Target, cfg.Weights)
	var hugeNote string
	if cfg.Weights, hugeNote = HugetlbWeights(cfg.Target, cfg.Weights); hugeNote != "" {
		arenaNote = strings.TrimPrefix(arenaNote+"; "+hugeNote, "; ")
	}
	var fileNote string
	if cfg.Weights, fileNote = FileWeights(cfg.Target, cfg.Weights); fileNote != "" {
		arenaNote = strings.TrimPrefix(arenaNote+"; "+fileNote, "; ")
	}
	// Minimization honours signals (the caller's ctx), not the duration:
	// a finding seen in time is minimized even when the clock ran out.
	sigCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	if cfg.Stop != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-cfg.Stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	if cfg.Workdir != "" {
		// One campaign per workdir: two would both save the same findings
		// and each other's programs (shared within this process: a gate's
		// campaigns).
		unlock, err := LockWorkdir(cfg.Workdir)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	r := &campaignRun{cfg: cfg, ctx: ctx, sigCtx: sigCtx, st: &Stats{}, start: time.Now()}
	st := r.st
	logStart(cfg, arenaNote)
	r.store = &FindingStore{Dir: cfg.Workdir, Seal: cfg.Seal, Log: cfg.Log, Pages: cfg.FindingPages}
	if err := r.store.Open(); err != nil {
		return nil, err
	}
	r.pool = NewPool()
	var err error
	if r.saved, err = openCorpus(cfg, r.pool); err != nil {
		return nil, err
	}
	defer r.saved.done()
	r.cov = newCoverState(cfg)
	if err := r.cov.openEarly(); err != nil {
		return nil, fmt.Errorf("campaign: --seed-corpus: %w", err)
	}
	defer r.cov.close(st)
	st.stats = newStatsLog(cfg, r.start)
	if st.stats != nil {
		st.stats.cover = r.cov.snapshot
	}
	defer st.stats.start(st, &r.programs, &r.forks, r.start)()
	defer r.showProgress()()

	// A target with several machines (a VM pool) runs that many programs
	// at once. Program i still draws from its own seed, but a mutation picks
	// from the pool as it stands, which then depends on completion order:
	// with one machine a seed replays the whole campaign, with several every
	// finding keeps its program. Judging, the pool and saving findings are
	// serialized.
	workers := agents.Parallelism(cfg.Target)
	if n := takePending(sigCtx, cfg, st, r.store, r.pool, r.saved, &r.harnessErrs, &r.programs, &r.forks, &r.mu, r.start); n > 0 {
		// The kernel broke before the first program: saved; stop.
		logf(cfg.Log, "campaign: the kernel under test failed %d run(s) before the first program (saved as findings above): stopping", n)
		workers = 0
	}
	var wg sync.WaitGroup
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			defer wg.Done()
			r.worker()
		}()
	}
	wg.Wait()
	st.Spent = st.spent.snapshot()
	st.Programs, st.Forks, st.Elapsed = r.programs.Load(), r.forks.Load(), time.Since(r.start)
	if r.fatal != nil {
		return st, r.fatal
	}
	return st, nil
}

// logStart logs the campaign's target and seed, the arena note and how
// often the page census is taken.
func logStart(cfg Config, arenaNote string) {
	logf(cfg.Log, "campaign: target %s, seed %d (%s)", cfg.Target.Name(), cfg.Seed, SeedRule(cfg.Seed))
	if arenaNote != "" {
		logf(cfg.Log, "campaign: %s", arenaNote)
	}
	every := cfg.CensusEvery
	if every == 0 {
		every = DefaultCensusEvery
	}
	switch cover := cfg.CoverEach(); {
	case cover > 1 && cfg.Blind:
		logf(cfg.Log, "campaign: %s (a blind campaign only reports it; --cover-every 1 for every program)", cfg.CoverRule())
	case cover > 1:
		logf(cfg.Log, "campaign: %s: guidance sees only those", cfg.CoverRule())
	}
	switch {
	case every < 0:
		logf(cfg.Log, "campaign: no page census at forks")
	case every > 1 && !cfg.Blind && !cfg.NoStates:
		logf(cfg.Log, "campaign: page census at forks for one fresh program in %d and every corpus mutation (the 'at fork' page counts are of those programs; memory states come from them)", every)
	case every > 1:
		logf(cfg.Log, "campaign: page census at forks for one program in %d (the 'at fork' page counts are of those programs)", every)
	}
}

// campaignRun is a running campaign: what its workers share.
type campaignRun struct {
	cfg Config
	// ctx ends with the campaign's bound; sigCtx only with the caller's
	// (minimization honours signals, not the duration).
	ctx, sigCtx     context.Context
	st              *Stats
	start           time.Time
	store           *FindingStore
	pool            *Pool
	saved           *savedCorpus
	cov             *coverState
	programs, forks atomic.Int64

	mu          sync.Mutex // guards the rest, the pool and the stats
	next        int64
	harnessErrs int
	fatal       error
}

// showProgress prints a status line every cfg.ProgressEvery (when
// cfg.Progress is set) until the function it returns is called.
func (r *campaignRun) showProgress() (stop func()) {
	cfg, st, start := r.cfg, r.st, r.start
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if cfg.Progress == nil {
			return
		}
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				el := time.Since(start).Seconds()
				line := fmt.Sprintf("%s  programs %d (%.1f/s)  forks %d (%.1f/s)  findings %d  %s",
					time.Since(start).Round(time.Second), r.programs.Load(), float64(r.programs.Load())/el,
					r.forks.Load(), float64(r.forks.Load())/el, atomic.LoadInt64(&st.Findings), r.cov.status())
				if cfg.ProgressLines {
					fmt.Fprintf(cfg.Progress, "progress: %s\n", line)
				} else {
					fmt.Fprintf(cfg.Progress, "\r%s   ", line)
				}
			}
		}
	}()
	return func() {
		close(stopProgress)
		<-progressDone
		if cfg.Progress != nil && !cfg.ProgressLines {
			fmt.Fprintln(cfg.Progress)
		}
	}
}

// worker runs programs until the campaign ends.
func (r *campaignRun) worker() {
	cfg, st := r.cfg, r.st
	for {
		r.mu.Lock()
		i := r.next
		if r.fatal != nil || r.ctx.Err() != nil || (cfg.Programs > 0 && i >= int64(cfg.Programs)) ||
			(cfg.StopAfterFindings > 0 && atomic.LoadInt64(&st.Findings) >= int64(cfg.StopAfterFindings)) {
			r.mu.Unlock()
			return
		}
		r.next++
		genFrom := time.Now()
		p, parent, org := r.cov.newProgram(i, r.pool)
		r.saved.mutated(i, parent)
		syms := r.cov.wantSymbols()
		r.mu.Unlock()
		ranFrom := time.Now()
		cover := cfg.CoverFor(i, org)
		jr := runJudged(cfg.Target, p, agents.Options{Corrupt: cfg.Corrupt, Symbols: syms && cover, NoCover: !cover, NoForkPages: !cfg.CensusFor(i, org),
			DigestsFirst: cfg.DigestsFirst})
		o, v, herr := jr.o, jr.v, jr.herr
		found, recorded := r.record(i, org, p, o, v, herr, jr.kept)
		st.spent.add(func(t *TimeSpent) {
			t.Programs++
			t.Generate += secs(ranFrom.Sub(genFrom))
			t.Run += secs(jr.ran)
			t.Judge += secs(jr.judged)
			t.WordReruns += int64(jr.reruns)
			t.Record += secs(recorded)
			if o == nil {
				t.Unanswered += secs(jr.ran)
				t.UnansweredRuns++
			}
			if o != nil && o.Phases != nil {
				if t.Guest == nil {
					t.Guest = map[string]float64{}
				}
				for k, us := range o.Phases {
					t.Guest[k] += float64(us) / 1e6
				}
			}
			if o != nil && o.Work != nil {
				if t.Work == nil {
					t.Work = map[string]float64{}
				}
				for k, us := range o.Work {
					t.Work[k] += float64(us) / 1e6
				}
			}
		})
		// New findings are saved at once, then minimized and saved
		// again, without the lock: other machines keep fuzzing.
		for _, f := range found {
			if err := saveAndReduce(r.sigCtx, cfg, st, r.store, &r.mu, f); err != nil {
				r.mu.Lock()
				if r.fatal == nil {
					r.fatal = err
				}
				r.mu.Unlock()
			}
		}
	}
}

// record takes in the outcome of program i under the lock and returns
// its new findings and the time it took.
func (r *campaignRun) record(i int64, org Origin, p *prog.Program, o *obs.Observation, v *judge.Verdict, herr error, ran time.Duration) ([]*Finding, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recFrom := time.Now()
	found, err := record(r.cfg, r.st, r.store, r.pool, r.saved, &r.harnessErrs, i, org, p, o, v, herr, &r.programs, &r.forks)
	for _, f := range found {
		f.RunTime = ran
	}
	if err != nil && r.fatal == nil {
		r.fatal = err
	}
	// After record: the schedule credits new findings too. (The
	// findings are saved below, once cov.record stripped the
	// kernel symbols from o.)
	if herr == nil {
		r.cov.record(i, p, o, ran, len(found))
	} else {
		r.cov.forget(i)
	}
	if len(found) > 0 && r.st.FirstProgram == 0 {
		r.st.FirstAt, r.st.FirstProgram = time.Since(r.start), r.programs.Load()
	}
	return found, time.Since(recFrom)
}

// DefaultCensusEvery is Config.CensusEvery's default: the page census is
// taken for one program in 4.
const DefaultCensusEvery = 4

// DefaultBlindCoverEvery is Config.CoverEvery's default in a blind
// campaign: kernel coverage is collected for one program in 8.
const DefaultBlindCoverEvery = 8

// DefaultGuidedCoverEvery is Config.CoverEvery's default in a guided
// campaign: kernel coverage is collected for one fresh program in 4 and
// for every corpus mutation (docs/coverage.md has the measurements).
const DefaultGuidedCoverEvery = 4

// CensusFor says whether program i, drawn as org, takes the page
// census at its forks: one program in CensusEvery by its index; in a
// guided campaign with memory states, every corpus mutation (the
// schedule credits a mutation by the states it reached, as by its
// edges: CoverFor) and one fresh program in CensusEvery by its fresh
// index.
func (c *Config) CensusFor(i int64, org Origin) bool {
	every := int64(c.CensusEvery)
	if every == 0 {
		every = DefaultCensusEvery
	}
	switch {
	case every < 0:
		return false
	case c.Blind || c.NoStates:
		return i%every == 0
	case org.Fresh < 0:
		return true
	}
	return org.Fresh%every == 0
}

// CoverEach is how many programs share one that collects kernel
// coverage (0: none does).
func (c *Config) CoverEach() int {
	switch {
	case c.NoCover:
		return 0
	case c.CoverEvery > 0:
		return c.CoverEvery
	case c.Blind:
		return DefaultBlindCoverEvery
	}
	return DefaultGuidedCoverEvery
}

// CoverRule says in words which programs collect kernel coverage
// ("KCOV on one fresh program in 4 and every corpus mutation"): the
// campaign's start line, its coverage status, its stats samples and the
// benchmarks say it the same way.
func (c *Config) CoverRule() string {
	switch every := c.CoverEach(); {
	case every == 0:
		return "no KCOV"
	case every == 1:
		return "KCOV on every program"
	case c.Blind:
		return fmt.Sprintf("KCOV on one program in %d", every)
	default:
		return fmt.Sprintf("KCOV on one fresh program in %d and every corpus mutation", every)
	}
}

// CoverFor says whether program i, drawn as org, collects kernel
// coverage: in a blind campaign one program in CoverEach by its index;
// in a guided one every corpus mutation (the schedule credits a
// mutation by what it reached) and one fresh program in CoverEach by
// its fresh index (fresh program k, the same program whatever the
// corpus share).
func (c *Config) CoverFor(i int64, org Origin) bool {
	every := int64(c.CoverEach())
	switch {
	case every == 0:
		return false
	case c.Blind:
		return i%every == 0
	case org.Fresh < 0:
		return true
	}
	return org.Fresh%every == 0
}

// takePending saves as findings the events the target saw before the
// first program (agents.PendingEvents: a kernel that broke on the
// fork-implementation calibration), and returns how many runs failed.
func takePending(ctx context.Context, cfg Config, st *Stats, store *FindingStore, pool *Pool, saved *savedCorpus, harnessErrs *int,
	programs, forks *atomic.Int64, mu *sync.Mutex, start time.Time) int {
	pt, ok := cfg.Target.(agents.PendingEvents)
	if !ok {
		return 0
	}
	n := 0
	for _, pe := range pt.TakePending() {
		v, herr := judge.Judge(pe.Program, nil, pe.Err)
		org := Origin{Note: pe.Note}
		mu.Lock()
		found, _ := record(cfg, st, store, pool, saved, harnessErrs, -1, org, pe.Program, nil, v, herr, programs, forks)
		if len(found) > 0 && st.FirstProgram == 0 {
			st.FirstAt, st.FirstProgram = time.Since(start), programs.Load()
		}
		mu.Unlock()
		if herr == nil && !v.OK() {
			n++
		}
		for _, f := range found {
			f.Origin = pe.Note
			if err := saveAndReduce(ctx, cfg, st, store, mu, f); err != nil {
				logf(cfg.Log, "campaign: saving %s: %v", f.Issue.Signature, err)
			}
		}
	}
	return n
}

// record takes in the outcome of program i (with the campaign's lock
// held), returns the findings with signatures never seen before (claimed:
// no other worker saves them), and a fatal error when the campaign must
// stop.
func record(cfg Config, st *Stats, store *FindingStore, pool *Pool, saved *savedCorpus, harnessErrs *int, i int64, org Origin, p *prog.Program,
	o *obs.Observation, v *judge.Verdict, herr error, programs, forks *atomic.Int64) ([]*Finding, error) {
	if herr != nil && agents.Refused(herr) {
		st.Refused++
		logf(cfg.Log, "program %d (seed %d): refused by the target, not run: %v", i, org.Seed, herr)
		return nil, nil
	}
	if herr != nil {
		st.HarnessErrors++
		st.stats.harnessError()
		*harnessErrs++
		logf(cfg.Log, "program %d (seed %d): harness error: %v", i, org.Seed, herr)
		if *harnessErrs >= cfg.MaxHarnessErrors {
			return nil, fmt.Errorf("campaign: %d harness errors in a row, last: %w", *harnessErrs, herr)
		}
		return nil, nil
	}
	*harnessErrs = 0
	programs.Add(1)
	forks.Add(int64(p.NumForks()))
	saved.add(pool, i, p)
	st.Judged.Add(v)
	st.stats.saw(o, v)
	if v.OK() {
		return nil, nil
	}
	st.Events++
	var found []*Finding
	for _, is := range v.Issues {
		if st.SignatureRuns == nil {
			st.SignatureRuns = map[string]int64{}
		}
		st.SignatureRuns[is.Signature]++
		if store.Seen(is.Signature) {
			if dir, ok := store.Known(is.Signature); ok && !slices.Contains(st.KnownDirs, dir) {
				st.Known++
				st.KnownDirs = append(st.KnownDirs, dir)
				logf(cfg.Log, "program %d (seed %d): known finding %s (saved by an earlier run: %s)", i, org.Seed, is.Signature, dir)
			}
			continue
		}
		atomic.AddInt64(&st.Findings, 1)
		saved.finding(p)
		logf(cfg.Log, "program %d (seed %d): new finding %s%s", i, org.Seed, is.Signature, org.note())
		kid := cfg.Kernel
		if o != nil {
			kid.Observed = o.Kernel
		}
		found = append(found, &Finding{
			Issue: is, Program: p, Observation: o, CampaignSeed: cfg.Seed, Index: i, Judged: v.Summary(),
			ProgramSeed: org.Seed, Origin: org.Note, Target: cfg.Target.Name(), Corrupt: cfg.Corrupt,
			TargetArgs: cfg.TargetArgs, Kernel: kid, Version: version.String(), NoCover: !cfg.CoverFor(i, org), NoCensus: !cfg.CensusFor(i, org),
		})
	}
	return found, nil
}

// saveAndReduce puts f on disk as seen, then minimizes it and saves it
// again. It takes mu only to update st.
func saveAndReduce(ctx context.Context, cfg Config, st *Stats, store *FindingStore, mu *sync.Mutex, f *Finding) error {
	t0 := time.Now()
	dir, err := store.Save(f)
	if err != nil {
		return err
	}
	t1 := time.Now()
	ReduceContext(ctx, cfg.Target, f, cfg.MinimizeRuns, cfg.MinimizeTime, cfg.Corrupt)
	t2 := time.Now()
	if dir, err = store.Save(f); err != nil {
		return err
	}
	st.spent.add(func(t *TimeSpent) {
		t.Save += secs(t1.Sub(t0) + time.Since(t2))
		t.Minimize += secs(t2.Sub(t1))
	})
	mu.Lock()
	defer mu.Unlock()
	st.Saved = append(st.Saved, dir)
	if st.First == nil {
		st.First = f
	}
	logf(cfg.Log, "  saved %s (minimized to %d ops, reproduced %d/%d)", dir, len(f.Minimized.Ops), f.Reproduced, f.Replays)
	if n := f.ReplayRunsNote(); n != "" {
		logf(cfg.Log, "  replays: %s", n)
	}
	if why := unconfirmedTrouble(f); why != "" {
		st.Unconfirmed = append(st.Unconfirmed, f.Issue.Signature+": "+why)
		logf(cfg.Log, "  %s: harness trouble, not counted against the kernel: %s", f.Issue.Signature, why)
	}
	return nil
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
