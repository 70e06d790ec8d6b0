package minimize

import (
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// DefaultMaxAttempts is the default bound on calls of the predicate.
const DefaultMaxAttempts = 2000

// Stats describes a minimization.
type Stats struct {
	Attempts       int  // calls of the predicate
	RemovedOps     int  // operations in the input minus operations in the result
	RemovedRegions int  // likewise for regions
	Exhausted      bool // the attempt budget ran out before a fixpoint: the result may not be 1-minimal
}

// Option configures Minimize.
type Option func(*config)

type config struct {
	maxAttempts int
	logf        func(format string, args ...any)
	adjusted    func(*prog.Program) *prog.Program
}

// MaxAttempts bounds the calls of the predicate (DefaultMaxAttempts if not
// given; n <= 0 means no bound).
func MaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = n } }

// Adjusted is asked, after a candidate reproduced, for the program that
// did: the predicate may have changed a value of its copy to make it
// reproduce (a fork's fail_nth aimed at a failure site), and returns it
// here (nil: the candidate as tried). The result becomes the current
// program.
func Adjusted(f func(tried *prog.Program) *prog.Program) Option {
	return func(c *config) { c.adjusted = f }
}

// Logf receives a line of progress after every pass.
func Logf(f func(format string, args ...any)) Option { return func(c *config) { c.logf = f } }

// Minimize returns a program, as small as it can find, for which
// reproduces is true. p must be valid and is assumed to reproduce (it is
// not tried; an invalid p comes back as a copy, unminimized). reproduces
// only ever sees valid programs, each at most once, and may keep them. p is
// not modified.
func Minimize(p *prog.Program, reproduces func(*prog.Program) bool, opts ...Option) (*prog.Program, Stats) {
	cfg := config{maxAttempts: DefaultMaxAttempts, logf: func(string, ...any) {}}
	for _, o := range opts {
		o(&cfg)
	}
	m := &minimizer{cfg: cfg, repro: reproduces, cache: make(map[string]bool), cur: p.Clone()}
	if p.Validate() != nil {
		return m.cur, m.stats
	}
	m.cache[string(p.Format())] = true
	for round := 1; ; round++ {
		m.ddmin()
		m.log("round %d: ddmin", round)
		m.oneMinimal()
		m.log("round %d: single units", round)
		changed := m.simplify()
		m.log("round %d: simplify (changed %v)", round, changed)
		if !changed || m.stats.Exhausted {
			break
		}
	}
	m.stats.RemovedOps = len(p.Ops) - len(m.cur.Ops)
	m.stats.RemovedRegions = len(p.Regions) - len(m.cur.Regions)
	return m.cur, m.stats
}

type minimizer struct {
	cfg   config
	repro func(*prog.Program) bool
	cache map[string]bool // program text -> reproduces
	cur   *prog.Program   // the smallest program known to reproduce
	stats Stats
}

func (m *minimizer) log(format string, args ...any) {
	args = append(args, len(m.cur.Ops), len(m.cur.Regions), m.stats.Attempts)
	m.cfg.logf(format+": %d ops, %d regions, %d attempts", args...)
}

// try reports whether q is valid and reproduces; if so, q becomes the
// current program.
func (m *minimizer) try(q *prog.Program) bool {
	if q.Validate() != nil {
		return false
	}
	key := string(q.Format())
	ok, seen := m.cache[key]
	if !seen {
		if m.cfg.maxAttempts > 0 && m.stats.Attempts >= m.cfg.maxAttempts {
			m.stats.Exhausted = true
			return false
		}
		m.stats.Attempts++
		ok = m.repro(q.Clone())
		m.cache[key] = ok
	}
	if ok {
		m.cur = q
		if m.cfg.adjusted != nil {
			if a := m.cfg.adjusted(q); a != nil && a.Validate() == nil {
				m.cur = a
			}
		}
	}
	return ok
}

// without returns the current program without the units whose index is
// set in removed.
func (m *minimizer) without(units [][]int, removed func(int) bool) *prog.Program {
	drop := make([]bool, len(m.cur.Ops))
	for i, u := range units {
		if removed(i) {
			for _, j := range u {
				drop[j] = true
			}
		}
	}
	return gen.RemoveOps(m.cur, drop)
}
