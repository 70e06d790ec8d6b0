package campaign

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// NewProgramParent is NewProgram that also returns the pool program a
// mutation started from (nil for a fresh program).
func NewProgramParent(s uint64, i int64, pool []*prog.Program, w gen.Weights) (p, parent *prog.Program) {
	r := ProgramRand(s, i)
	if len(pool) > 0 && r.IntN(3) == 0 {
		parent = pool[r.IntN(len(pool))]
		return gen.Mutate(r, parent, pool, w), parent
	}
	return gen.Generate(r, w), nil
}

// CorpusFindings is the subdirectory of a saved corpus that keeps the
// programs that showed a new finding (never evicted).
const CorpusFindings = "findings"

// maxLoggedMutations bounds the log lines about mutations of restored
// programs (the total is logged at the end).
const maxLoggedMutations = 10

// savedCorpus keeps the mutation pool on disk (Config.Corpus) so a later
// run continues from it. It keeps every program that ran (what added
// kernel coverage is kept apart, in the coverage corpus: coverage.go),
// bounded like the pool: a program evicted from
// the pool is deleted from disk; programs that showed a new finding are
// kept in CorpusFindings for good. All methods are nil-safe and called
// with the campaign's lock held.
type savedCorpus struct {
	dir, finds *corpus.Dir
	log        func(format string, args ...any)
	restored   map[*prog.Program]string // restored program -> its file name
	mutations  int                      // programs mutated from restored ones
	failed     bool                     // a write failed (logged once)
}

// openCorpus loads cfg.Corpus into pool and returns the saver.
func openCorpus(cfg Config, pool *Pool) (*savedCorpus, error) {
	if cfg.Corpus == "" {
		return nil, nil
	}
	dir, err := corpus.Open(cfg.Corpus)
	if err != nil {
		return nil, err
	}
	finds, err := corpus.Open(filepath.Join(cfg.Corpus, CorpusFindings))
	if err != nil {
		return nil, err
	}
	c := &savedCorpus{dir: dir, finds: finds, restored: map[*prog.Program]string{},
		log: func(format string, args ...any) { logf(cfg.Log, format, args...) }}
	n := 0
	for _, d := range []*corpus.Dir{finds, dir} {
		es, err := d.Load()
		if err != nil {
			// Unreadable files are named in err; the rest is used.
			c.log("corpus: %v", err)
		}
		for _, e := range es {
			if len(pool.Progs) >= PoolMax {
				// Beyond the bound (programs of a run killed between
				// keeping a program and deleting the one it evicted).
				if d == dir {
					os.Remove(filepath.Join(dir.Path(), e.Name))
				}
				continue
			}
			pool.Add(int64(len(pool.Progs)), e.Prog)
			c.restored[e.Prog] = e.Name
			n++
		}
	}
	c.log("corpus: %s: restored %d programs (%d that showed findings) into the mutation pool (%d programs); every program that runs is kept here (bounded at %d; programs that add kernel coverage also go to the coverage corpus)",
		cfg.Corpus, n, countFiles(finds), len(pool.Progs), PoolMax)
	return c, nil
}

func countFiles(d *corpus.Dir) int {
	names, _ := d.Names()
	return len(names)
}

// mutated notes that program i was mutated from parent.
func (c *savedCorpus) mutated(i int64, parent *prog.Program) {
	if c == nil || parent == nil {
		return
	}
	name, ok := c.restored[parent]
	if !ok {
		return
	}
	c.mutations++
	if c.mutations <= maxLoggedMutations {
		c.log("program %d: mutated from restored corpus program %s", i, strings.TrimSuffix(name, corpus.Ext))
	}
}

// add puts program i into the pool and on disk, deleting the program it
// evicts.
func (c *savedCorpus) add(pool *Pool, i int64, p *prog.Program) {
	var old *prog.Program
	if len(pool.Progs) >= PoolMax {
		old = pool.Progs[int(i)%PoolMax]
	}
	pool.Add(i, p)
	if c == nil {
		return
	}
	if _, _, err := c.dir.Add(p); err != nil {
		c.fail(err)
	}
	if old != nil && old != p {
		name := corpus.Name(old)
		if name != corpus.Name(p) {
			os.Remove(filepath.Join(c.dir.Path(), name))
		}
		delete(c.restored, old)
	}
}

// finding keeps a program that showed a new finding.
func (c *savedCorpus) finding(p *prog.Program) {
	if c == nil {
		return
	}
	if _, _, err := c.finds.Add(p); err != nil {
		c.fail(err)
	}
}

func (c *savedCorpus) fail(err error) {
	if !c.failed {
		c.failed = true
		c.log("corpus: saving failed (the campaign goes on): %v", err)
	}
}

// done logs how much the restored corpus was used.
func (c *savedCorpus) done() {
	if c == nil {
		return
	}
	c.log("corpus: %d programs mutated from the restored corpus; %d programs kept in %s", c.mutations, countFiles(c.dir), c.dir.Path())
}

// CorpusScope names the corpus directory of a target and kernel build:
// "<target>-<kernel>", with anything but letters, digits, '-', '_', '+'
// and '.' replaced.
func CorpusScope(target, kernel string) string {
	s := target
	if kernel != "" {
		s += "-" + kernel
	}
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("-_+.", ch) >= 0) {
			b[i] = '_'
		}
	}
	return fmt.Sprint(string(b))
}
