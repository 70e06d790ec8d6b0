package campaign

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// coverState is a campaign's coverage guidance (campaign/cover). The
// tracker opens at the first observation (the corpus directory is named
// after the kernel); every method but status runs under the campaign's lock.
type coverState struct {
	cfg    Config
	t      *cover.Tracker
	failed string // the tracker could not open: coverage is off
	line   atomic.Value
	counts atomic.Pointer[cover.Counts] // the totals, for stats samples
	from   map[int64]cover.From         // where running programs came from (guided)
	// fresh counts the fresh programs drawn: fresh program k draws from
	// ProgramRand(Seed, k) whether or not corpus mutations came between,
	// so a guided campaign runs a blind one's fresh programs in the same
	// order, only spaced out (a corpus draw no longer replaces one).
	fresh  int64
	origin map[int64]Origin // programs drawn and not yet recorded
	// kernelID, when set, names the corpus directory instead of the
	// target's image or the observed release (Guide).
	kernelID string
	// symsAtHand: the kernel's symbols need not be asked for
	// (symbolsAtHand, computed once).
	symsOnce   sync.Once
	symsAtHand bool
}

func newCoverState(cfg Config) *coverState {
	c := &coverState{cfg: cfg, from: map[int64]cover.From{}, origin: map[int64]Origin{}}
	c.line.Store("coverage: -")
	return c
}

// wantSymbols: ask the target for kallsyms until the tracker has them;
// before the tracker opens, only if they are not at hand already.
func (c *coverState) wantSymbols() bool {
	if c.failed != "" {
		return false
	}
	if c.t == nil {
		return !c.symbolsAtHand()
	}
	return c.t.NeedSymbols()
}

// symbolsAtHand reports whether the tracker will have the kernel's
// symbols when it opens (cover.HaveSymbols: an earlier campaign on the
// same image kept them), so the first program need not ask the guest for
// them, seconds of reading /proc/kallsyms under TCG. Known only when the
// corpus directory's name is known before the first observation.
func (c *coverState) symbolsAtHand() bool {
	c.symsOnce.Do(func() {
		id := c.kernelID
		if id == "" {
			image := c.image()
			if image == "" {
				return
			}
			id = cover.KernelID(image, "")
		}
		c.symsAtHand = cover.HaveSymbols(c.cfg.Workdir, id)
	})
	return c.symsAtHand
}

// Origin is where program i of a campaign came from: its random source
// and, when that is not ProgramRand(Seed, i), how it was drawn.
type Origin struct {
	// Seed is the program's random source: ProgramSeed(Seed, Fresh), or
	// ProgramSeed(CorpusSeed(Seed), i) for a corpus mutation.
	Seed uint64
	// Fresh is k for fresh program k (generated, or mutated from the
	// pool, from ProgramRand(Seed, k)); -1 for a corpus mutation.
	Fresh int64
	// Note says how the program was drawn when it is not program i's
	// ProgramRand(Seed, i): "fresh program k" or the corpus mutation.
	Note string
}

// note is the Note as a log line's tail.
func (o Origin) note() string {
	if o.Note == "" {
		return ""
	}
	return " (" + o.Note + ")"
}

// CorpusSeed is the campaign seed of a guided campaign's corpus
// mutations: the draw and the mutation of program i, when it mutates a
// corpus program, come from ProgramRand(CorpusSeed(s), i), apart from
// the fresh programs' ProgramRand(s, k).
func CorpusSeed(s uint64) uint64 { return s ^ 0x636f72707573 } // "corpus"

// newProgram is NewProgram with the corpus: when guided, the tracker's
// schedule decides whether program i mutates a corpus program (a share
// that follows what corpus mutations and fresh programs have found per
// second lately) or is the next of NewProgram's fresh programs and pool
// mutations. Asked again for the same i before it is recorded (a
// coordinator republishing), it draws the same way.
func (c *coverState) newProgram(i int64, pool *Pool) (p, parent *prog.Program, org Origin) {
	org, again := c.origin[i]
	if c.t != nil && c.t.Guided {
		f, drawn := c.from[i]
		if !drawn {
			// The schedule's own stream, apart from the programs'.
			f = c.t.Draw(rand.New(rand.NewPCG(ProgramSeed(CorpusSeed(c.cfg.Seed), i), ^c.cfg.Seed)))
			c.from[i] = f
		}
		if f != cover.Fresh {
			r := ProgramRand(CorpusSeed(c.cfg.Seed), i)
			parent = c.t.Program(f)
			org = Origin{Seed: ProgramSeed(CorpusSeed(c.cfg.Seed), i), Fresh: -1,
				Note: fmt.Sprintf("a mutation of corpus program %s from campaign.ProgramSeed(%d, %d)", c.t.EntryName(f), CorpusSeed(c.cfg.Seed), i)}
			c.origin[i] = org
			return gen.Mutate(r, parent, pool.Progs, c.cfg.Weights), parent, org
		}
	}
	if !again || org.Fresh < 0 {
		k := c.fresh
		c.fresh++
		org = Origin{Seed: ProgramSeed(c.cfg.Seed, k), Fresh: k}
		if k != i {
			org.Note = fmt.Sprintf("fresh program %d: campaign.ProgramSeed(%d, %d)", k, c.cfg.Seed, k)
		}
		c.origin[i] = org
	}
	p, parent = NewProgramParent(c.cfg.Seed, org.Fresh, pool.Progs, c.cfg.Weights)
	return p, parent, org
}

// image is the target's kernel image, if it boots one
// (agents.KernelImager): the image names the coverage corpus
// (cover.KernelID).
func (c *coverState) image() string {
	if c.cfg.Target != nil {
		if ki, ok := agents.KernelImageOf(c.cfg.Target); ok {
			return ki.KernelImage()
		}
	}
	return ""
}

// openEarly opens the tracker before the first program when the corpus
// directory's name is known already (a target that boots an image, or a
// Guide's kernelID) and a seed corpus is to be copied, so that a seed
// corpus that does not fit is an error before the campaign starts rather
// than coverage switched off after its first program.
func (c *coverState) openEarly() error {
	if c.cfg.SeedCorpus == "" {
		return nil
	}
	id := c.kernelID
	if id == "" {
		image := c.image()
		if image == "" {
			return nil // named after the first observation's release
		}
		id = cover.KernelID(image, "")
	}
	return c.open(id)
}

// open seeds (cfg.SeedCorpus) and opens the tracker of kernel build id;
// an error switches coverage off, said in the status and the log.
func (c *coverState) open(id string) error {
	err := func() error {
		if c.cfg.SeedCorpus != "" {
			n, err := cover.Seed(c.cfg.Workdir, id, c.cfg.SeedCorpus)
			if err != nil {
				return err
			}
			if n > 0 {
				logf(c.cfg.Log, "coverage: seeded the corpus with %d programs from %s", n, c.cfg.SeedCorpus)
			} else {
				logf(c.cfg.Log, "coverage: the corpus already holds programs: not seeded from %s", c.cfg.SeedCorpus)
			}
		}
		t, err := cover.Open(c.cfg.Workdir, id, !c.cfg.Blind, c.cfg.CoverCSV)
		if err != nil {
			return err
		}
		c.t = t
		if t.SymbolsFrom != "" {
			logf(c.cfg.Log, "coverage: the kernel's symbols from %s (an earlier campaign on this image read them; the guest was not asked)", t.SymbolsFrom)
		}
		if c.cfg.NoStates {
			logf(c.cfg.Log, "coverage: memory states off (--no-states): programs enter the corpus for new KCOV edges only")
		}
		if n := t.Counts().Corpus; n > 0 {
			logf(c.cfg.Log, "coverage: corpus %s holds %d programs", t.Dir, n)
		}
		return nil
	}()
	if err != nil {
		c.failed = err.Error()
		c.line.Store("coverage: off (" + c.failed + ")")
		logf(c.cfg.Log, "coverage: off: %v", err)
	}
	return err
}

// record takes in the coverage of program i (it ran for ran and showed
// findings new findings), credits its source, and strips the kernel
// symbols from o, which findings keep.
func (c *coverState) record(i int64, p *prog.Program, o *obs.Observation, ran time.Duration, findings int) {
	from, drawn := c.from[i]
	delete(c.from, i)
	delete(c.origin, i)
	if o == nil || c.failed != "" {
		return
	}
	if c.t == nil {
		id := c.kernelID
		if id == "" {
			id = cover.KernelID(c.image(), o.Kernel)
		}
		if err := c.open(id); err != nil {
			return
		}
	}
	if o.Cover != nil && o.Cover.Symbols != "" {
		if c.t.NeedSymbols() {
			if err := c.t.SetSymbols(o.Cover.Symbols); err != nil {
				logf(c.cfg.Log, "coverage: kernel symbols: %v", err)
			}
		}
		o.Cover.Symbols = ""
	}
	var states []uint64
	if !c.cfg.NoStates {
		states = cover.StateSignal(p, o)
	}
	g, err := c.t.AddRun(p, o.Cover, states)
	if err != nil {
		logf(c.cfg.Log, "program %d: coverage: %v", i, err)
	}
	g.NewFindings = findings
	// The schedule compares its two sources by what programs that
	// collected found: with sampled coverage a fresh program without
	// KCOV (or with the census alone) would count for less than the
	// corpus mutations, which always collect. Where the kernel has no
	// KCOV at all, memory states are the only signal.
	if drawn && (o.Cover.Available() || (g.NewStates > 0 && c.t.Counts().PCs == 0)) {
		c.t.Credit(from, ran, g)
	}
	line := c.t.Status()
	if c.cfg.CoverEach() > 1 && c.t.Counts().PCs > 0 {
		line += " (" + c.cfg.CoverRule() + ")"
	}
	c.line.Store(line)
	n := c.t.Counts()
	c.counts.Store(&n)
}

// snapshot is the coverage so far (nil: none collected); safe from any
// goroutine.
func (c *coverState) snapshot() *cover.Counts { return c.counts.Load() }

func (c *coverState) status() string { return c.line.Load().(string) }

func (c *coverState) close(st *Stats) {
	st.Cover = c.status()
	if c.t != nil {
		st.CoverCounts = c.t.Counts()
		st.CoverDir = c.t.Dir
		if err := c.t.Close(); err != nil {
			logf(c.cfg.Log, "coverage: %v", err)
		}
	}
}

// forget drops program i's source: it did not run to an observation.
func (c *coverState) forget(i int64) {
	delete(c.from, i)
	delete(c.origin, i)
}

// Guide is a campaign's coverage guidance for drivers other than Run
// (the distributed coordinator): the same corpus, schedule and status.
// Its methods are not safe for concurrent use; the caller locks.
type Guide struct{ c *coverState }

// NewGuide guides programs drawn from cfg.Seed with cfg.Weights, keeping
// the corpus under cfg.Workdir (cfg.Blind: measure only; cfg.CoverCSV,
// cfg.Log as for Run). kernelID names the corpus directory (for example
// the first 16 hex digits of the image's SHA-256, as cover.KernelID);
// "" names it after the release the first observation reports.
func NewGuide(cfg Config, kernelID string) *Guide {
	c := newCoverState(cfg)
	c.kernelID = kernelID
	return &Guide{c: c}
}

// NewProgram returns program i (and the corpus or pool program it
// mutates, if any) and where it came from.
func (g *Guide) NewProgram(i int64, pool *Pool) (p, parent *prog.Program, org Origin) {
	return g.c.newProgram(i, pool)
}

// Fresh is the number of fresh programs drawn so far (fresh program k
// draws from ProgramRand(Seed, k)): a resumed campaign goes on with
// SetFresh so that no fresh program is drawn twice.
func (g *Guide) Fresh() int64 { return g.c.fresh }

// SetFresh sets the number of fresh programs drawn before (see Fresh).
func (g *Guide) SetFresh(n int64) { g.c.fresh = n }

// Record takes in the observation of program i, which ran for ran and
// showed findings new findings, and strips the kernel symbols from it.
func (g *Guide) Record(i int64, p *prog.Program, o *obs.Observation, ran time.Duration, findings int) {
	g.c.record(i, p, o, ran, findings)
}

// WantSymbols reports whether the next program should ask its target for
// the kernel's text symbols (the corpus has none yet).
func (g *Guide) WantSymbols() bool { return g.c.wantSymbols() }

// Forget drops program i, which did not run to an observation.
func (g *Guide) Forget(i int64) { g.c.forget(i) }

// Status is the coverage phrase of the progress line.
func (g *Guide) Status() string { return g.c.status() }

// Close flushes the corpus's time series and returns the totals (nil:
// no coverage was collected).
func (g *Guide) Close() *cover.Counts {
	var st Stats
	g.c.close(&st)
	if g.c.t == nil {
		return nil
	}
	return &st.CoverCounts
}
