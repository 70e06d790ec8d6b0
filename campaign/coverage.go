package campaign

import (
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// KernelImager is a target that boots a kernel image (the QEMU target):
// the image names the coverage corpus (cover.KernelID).
type KernelImager interface{ KernelImage() string }

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
	// kernelID, when set, names the corpus directory instead of the
	// target's image or the observed release (Guide).
	kernelID string
}

func newCoverState(cfg Config) *coverState {
	c := &coverState{cfg: cfg, from: map[int64]cover.From{}}
	c.line.Store("coverage: -")
	return c
}

// wantSymbols: ask the target for kallsyms until the tracker has them.
func (c *coverState) wantSymbols() bool {
	return c.failed == "" && (c.t == nil || c.t.NeedSymbols())
}

// newProgram is NewProgram with the corpus: when guided, the tracker's
// schedule decides whether program i mutates a corpus program (a share
// that follows what corpus mutations and fresh programs have found per
// second lately) or is one of NewProgram's fresh programs and pool
// mutations. Program i's choice and mutation draw from ProgramRand.
func (c *coverState) newProgram(i int64, pool *Pool) (p, parent *prog.Program) {
	if c.t != nil && c.t.Guided {
		r := ProgramRand(c.cfg.Seed, i)
		f := c.t.Draw(r)
		c.from[i] = f
		if f != cover.Fresh {
			parent = c.t.Program(f)
			return gen.Mutate(r, parent, pool.Progs, c.cfg.Weights), parent
		}
	}
	return NewProgramParent(c.cfg.Seed, i, pool.Progs, c.cfg.Weights)
}

// image is the target's kernel image, if it boots one.
func (c *coverState) image() string {
	if c.cfg.Target != nil {
		if ki, ok := agents.Unwrap(c.cfg.Target).(KernelImager); ok {
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

// record takes in the coverage of program i (it ran for ran), credits
// its source, and strips the kernel symbols from o, which findings keep.
func (c *coverState) record(i int64, p *prog.Program, o *obs.Observation, ran time.Duration) {
	from, drawn := c.from[i]
	delete(c.from, i)
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
	g, err := c.t.Add(p, o.Cover)
	if err != nil {
		logf(c.cfg.Log, "program %d: coverage: %v", i, err)
	}
	if drawn && o.Cover.Available() {
		c.t.Credit(from, ran, g)
	}
	c.line.Store(c.t.Status())
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
func (c *coverState) forget(i int64) { delete(c.from, i) }

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
// mutates, if any).
func (g *Guide) NewProgram(i int64, pool *Pool) (p, parent *prog.Program) {
	return g.c.newProgram(i, pool)
}

// Record takes in the observation of program i, which ran for ran, and
// strips the kernel symbols from it.
func (g *Guide) Record(i int64, p *prog.Program, o *obs.Observation, ran time.Duration) {
	g.c.record(i, p, o, ran)
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
