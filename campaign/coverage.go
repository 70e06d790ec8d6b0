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

// record takes in the coverage of program i (it ran for ran), credits
// its source, and strips the kernel symbols from o, which findings keep.
func (c *coverState) record(i int64, p *prog.Program, o *obs.Observation, ran time.Duration) {
	from, drawn := c.from[i]
	delete(c.from, i)
	if o == nil || c.failed != "" {
		return
	}
	if c.t == nil {
		image := ""
		if ki, ok := agents.Unwrap(c.cfg.Target).(KernelImager); ok {
			image = ki.KernelImage()
		}
		csv := c.cfg.CoverCSV
		t, err := cover.Open(c.cfg.Workdir, cover.KernelID(image, o.Kernel), !c.cfg.Blind, csv)
		if err != nil {
			c.failed = err.Error()
			c.line.Store("coverage: off (" + c.failed + ")")
			logf(c.cfg.Log, "coverage: off: %v", err)
			return
		}
		c.t = t
		if n := t.Counts().Corpus; n > 0 {
			logf(c.cfg.Log, "coverage: corpus %s holds %d programs", t.Dir, n)
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
