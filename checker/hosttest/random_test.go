package hosttest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/internal/randprog"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestRandomGen runs generated programs on the host kernel: the model must
// accept every observation (zero false positives). HOSTN sets the number of
// programs, HOSTSEED the first seed; failing programs are written to
// $HOSTFAIL (a directory) if set.
func TestRandomGen(t *testing.T) {
	n := envInt("HOSTN", 20)
	seed := envInt("HOSTSEED", 1)
	fails := 0
	for s := seed; s < seed+n; s++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(s), 7)), gen.DefaultWeights())
		if v := runCheck(t, p); !v.OK() {
			fails++
			dump(t, fmt.Sprintf("gen-%d", s), p, v.Report())
			if fails > 5 {
				t.Fatal("too many failures")
			}
		}
	}
}

// envInt reads a count from the environment; -short runs 2 programs.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	if testing.Short() && name == "HOSTN" {
		return 2
	}
	return def
}

func dump(t testing.TB, name string, p *prog.Program, report string) {
	t.Helper()
	if dir := os.Getenv("HOSTFAIL"); dir != "" {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(dir+"/"+name+".ffz", p.Format(), 0o644)
		os.WriteFile(dir+"/"+name+".txt", []byte(report), 0o644)
	}
	if len(report) > 3000 {
		report = report[:3000] + "..."
	}
	t.Errorf("%s:\n%s\n%s", name, p.Format(), report)
}

// TestRandomGenBites perturbs host observations of generated programs and
// checks that the oracles notice, and reports how much the model judged.
func TestRandomGenBites(t *testing.T) {
	n := envInt("HOSTN", 15)
	seed := envInt("HOSTSEED", 1)
	var views, pages, lost, unjudged, flips, caught int
	var slowest time.Duration
	slowSeed := 0
	w := gen.DefaultWeights()
	w.ThreadProb, w.ThreadVMAProb = 0, 0 // threads make words unjudgeable
	for s := seed; s < seed+n; s++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(s), 7)), w)
		o, err := exe(t).Run(p, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st := time.Now()
		v := checker.Check(p, o)
		if d := time.Since(st); d > slowest {
			slowest, slowSeed = d, s
		}
		views += v.Stats.Views
		pages += v.Stats.Pages
		lost += v.Stats.Lost
		if v.Stats.SharedUnjudged {
			unjudged++
		}
		if !v.OK() {
			dump(t, fmt.Sprintf("gen-%d", s), p, v.Report())
			continue
		}
		for vi := range o.Views {
			// Where the verdict says shared memory went unjudged (the
			// model lost a write that may have reached it: a skipped
			// operation, a crash), flip a word of anonymous private
			// memory only.
			words := o.Views[vi].Words
			if v.Stats.SharedUnjudged {
				words = nil
				for k, w := range o.Views[vi].Words {
					if p.Regions[w.Region].Kind.Base() == prog.AnonPrivate {
						words = append(words, o.Views[vi].Words[k])
					}
				}
			}
			if len(words) == 0 {
				continue
			}
			pick := words[len(words)/2]
			var w *obs.Word
			for k := range o.Views[vi].Words {
				if o.Views[vi].Words[k] == pick {
					w = &o.Views[vi].Words[k]
					break
				}
			}
			old := w.Value
			w.Value ^= 1 << 20
			flips++
			if !checker.Check(p, o).OK() {
				caught++
			}
			w.Value = old
		}
	}
	t.Logf("%d programs: %d views, %d pages compared, %d lost-track ops, %d with shared memory unjudged; %d/%d word flips caught; slowest check %v (seed %d)",
		n, views, pages, lost, unjudged, caught, flips, slowest, slowSeed)
	if caught < flips*9/10 {
		t.Errorf("only %d of %d flipped words were caught", caught, flips)
	}
}

// TestRandomLocal runs the checker's own corner-case programs
// (internal/randprog) on the host kernel: zero findings allowed.
func TestRandomLocal(t *testing.T) {
	n := envInt("HOSTN", 50)
	seed := envInt("HOSTSEED", 1)
	fails := 0
	var lost int
	for s := seed; s < seed+n; s++ {
		r := rand.New(rand.NewPCG(uint64(s), 11))
		p := randprog.Build(r, 10+r.IntN(50))
		v := runCheck(t, p)
		lost += v.Stats.Lost
		if !v.OK() {
			fails++
			dump(t, fmt.Sprintf("local-%d", s), p, v.Report())
			if fails > 5 {
				t.Fatal("too many failures")
			}
		}
	}
	t.Logf("%d programs, %d lost-track operations", n, lost)
}

// TestRandomThreads runs generated programs with writer threads and
// thread VMA operations: zero findings allowed.
func TestRandomThreads(t *testing.T) {
	n := envInt("HOSTN", 10)
	seed := envInt("HOSTSEED", 1)
	w := gen.DefaultWeights()
	w.ThreadProb, w.ThreadVMAProb = 0.5, 0.3
	fails := 0
	for s := seed; s < seed+n; s++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(s), 13)), w)
		if v := runCheck(t, p); !v.OK() {
			fails++
			dump(t, fmt.Sprintf("threads-%d", s), p, v.Report())
			if fails > 5 {
				t.Fatal("too many failures")
			}
		}
	}
}

// TestWordCap runs programs with a tiny per-view word cap: capped views
// are judged by page digests, with no false positives.
func TestWordCap(t *testing.T) {
	n := envInt("HOSTN", 20)
	seed := envInt("HOSTSEED", 1)
	for s := seed; s < seed+n; s++ {
		r := rand.New(rand.NewPCG(uint64(s), 17))
		p := randprog.Build(r, 10+r.IntN(50))
		o, err := exe(t).Run(p, executor.Options{WordCap: 1 + r.IntN(20)})
		if err != nil {
			t.Fatal(err)
		}
		if v := checker.Check(p, o); !v.OK() {
			dump(t, fmt.Sprintf("wordcap-%d", s), p, v.Report())
		}
	}
}

// TestDigestsFirst runs generated programs (threads included) with views
// that carry words only in the regions threads race in: no false
// positives, and a changed digest of a page known by digest only is
// caught as a digest finding.
func TestDigestsFirst(t *testing.T) {
	n := envInt("HOSTN", 20)
	seed := envInt("HOSTSEED", 1)
	var digestOnly, missing, flips, caught int
	for s := seed; s < seed+n; s++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(s), 19)), gen.DefaultWeights())
		o, err := exe(t).Run(p, executor.Options{DigestsFirst: true})
		if err != nil {
			t.Fatal(err)
		}
		v := checker.Check(p, o)
		missing += v.Stats.WordsMissing
		if !v.OK() {
			dump(t, fmt.Sprintf("digests-%d", s), p, v.Report())
			continue
		}
		raced := p.RacedRegions()
		for vi := range o.Views {
			pages := o.Views[vi].Pages
			for k := range pages {
				d := &pages[k]
				if raced&(1<<uint(d.Region)) != 0 || v.Stats.SharedUnjudged && p.Regions[d.Region].Kind.Base() != prog.AnonPrivate {
					continue
				}
				digestOnly++
				if k != len(pages)/2 {
					continue
				}
				old := d.Digest
				d.Digest ^= 1 << 20
				flips++
				for _, f := range checker.Check(p, o).Findings {
					if strings.Contains(f.Signature, ":digest:") {
						caught++
						break
					}
				}
				d.Digest = old
			}
		}
	}
	t.Logf("%d programs: %d pages known by digest only, %d pages or cells unjudged for lack of words; %d/%d changed digests caught", n, digestOnly, missing, caught, flips)
	if digestOnly == 0 {
		t.Fatal("no page was known by digest only: the test shows nothing")
	}
	if caught < flips*9/10 {
		t.Errorf("only %d of %d changed digests were caught", caught, flips)
	}
}

// TestWordsMissing strips the words of the regions threads race in from
// views of thread programs: the pages and cells that needed them are
// counted unjudged, never judged from what is left.
func TestWordsMissing(t *testing.T) {
	n := envInt("HOSTN", 10)
	seed := envInt("HOSTSEED", 1)
	w := gen.DefaultWeights()
	w.ThreadProb, w.ThreadVMAProb = 1, 0
	stripped, missing := 0, 0
	for s := seed; s < seed+n; s++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(s), 23)), w)
		raced := p.RacedRegions()
		o, err := exe(t).Run(p, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if v := checker.Check(p, o); !v.OK() || v.Stats.WordsMissing != 0 {
			t.Errorf("seed %d with every word: %d findings, %d words missing", s, len(v.Findings), v.Stats.WordsMissing)
			continue
		}
		for vi := range o.Views {
			v := &o.Views[vi]
			ws := v.Words[:0]
			for _, w := range v.Words {
				if raced&(1<<uint(w.Region)) == 0 {
					ws = append(ws, w)
				} else {
					v.Truncated = true
					stripped++
				}
			}
			v.Words = ws
		}
		v := checker.Check(p, o)
		missing += v.Stats.WordsMissing
		if !v.OK() {
			dump(t, fmt.Sprintf("stripped-%d", s), p, v.Report())
		}
	}
	t.Logf("%d thread programs: %d words stripped, %d pages or cells unjudged", n, stripped, missing)
	if stripped == 0 || missing == 0 {
		t.Fatalf("%d words stripped, %d unjudged: the test shows nothing", stripped, missing)
	}
}
