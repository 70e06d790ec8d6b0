package campaign

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// coverTarget is modelTarget with made-up kernel coverage: one "PC" per
// operation kind and one edge per pair of consecutive operations, so
// that new combinations of operations are new edges.
type coverTarget struct{ modelTarget }

// Parallel is 1: one machine, so a seed replays the same campaign. With
// three (modelTarget's), mutations drew on a pool in completion order,
// and about one run in 35 drew a program on which the model disagrees
// with itself (TestGuidedCampaign then fails "N findings from the
// model"; it logs their signatures and programs now, for whoever chases
// that model gap).
func (c *coverTarget) Parallel() int { return 1 }

func (c *coverTarget) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	o, _ := c.modelTarget.Run(p, opts)
	if opts.NoCover {
		o.Cover = &obs.Coverage{Unavailable: "off (asked not to collect)"}
		return o, nil
	}
	cv := &obs.Coverage{Procs: 1}
	pcs, edges := map[uint64]bool{}, map[uint32]bool{}
	prev := ""
	for _, op := range p.Ops {
		kind := fmt.Sprintf("%v/%d/%d", op.Kind, op.Proc, op.Advice)
		h := fnv.New64a()
		h.Write([]byte(kind))
		pcs[h.Sum64()] = true
		e := fnv.New32a()
		e.Write([]byte(prev + ">" + kind))
		edges[e.Sum32()] = true
		prev = kind
	}
	for pc := range pcs {
		cv.PCs = append(cv.PCs, pc)
	}
	for e := range edges {
		cv.Edges = append(cv.Edges, e)
	}
	o.Cover = cv
	return o, nil
}

// TestGuidedCampaign: a guided campaign builds a corpus and draws part of
// its programs from it; a blind one builds the same kind of corpus and
// never draws from it.
func TestGuidedCampaign(t *testing.T) {
	w := noThreads(gen.DefaultWeights()) // see TestParallelCampaign
	for _, blind := range []bool{false, true} {
		st, err := Run(context.Background(), Config{Target: &coverTarget{}, Seed: 5, Programs: 150, Weights: w,
			Workdir: t.TempDir(), Blind: blind})
		if err != nil {
			t.Fatal(err)
		}
		c := st.CoverCounts
		t.Logf("blind=%v: %s; %d of %d drawn programs from the corpus", blind, st.Cover, c.FromCorpus, c.Drawn)
		if st.Findings != 0 {
			t.Errorf("blind=%v: %d findings from the model", blind, st.Findings)
			for _, d := range st.Saved {
				sig, _ := os.ReadFile(filepath.Join(d, "signature"))
				prog, _ := os.ReadFile(filepath.Join(d, "minimized.ffz"))
				t.Logf("%s:\n%s", sig, prog)
			}
		}
		if c.Corpus == 0 || c.Edges == 0 {
			t.Errorf("blind=%v: no corpus (%+v)", blind, c)
		}
		if blind {
			if c.FromCorpus != 0 || !strings.Contains(st.Cover, "(blind)") {
				t.Errorf("blind campaign: %d programs from the corpus, status %q", c.FromCorpus, st.Cover)
			}
			continue
		}
		if c.Drawn < 140 || c.FromCorpus < 10 || c.FromCorpus > c.Drawn*9/10 || !strings.Contains(st.Cover, "% from corpus)") {
			t.Errorf("guided campaign: %d of %d drawn from the corpus, status %q", c.FromCorpus, c.Drawn, st.Cover)
		}
	}
}

// countingCover is coverTarget counting the runs that collected.
type countingCover struct {
	coverTarget
	runs, covered, censused atomic.Int64
}

func (c *countingCover) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	c.runs.Add(1)
	if !opts.NoCover {
		c.covered.Add(1)
	}
	if !opts.NoForkPages {
		c.censused.Add(1)
	}
	return c.coverTarget.Run(p, opts)
}

// TestGuidedSampledCover: a guided campaign with CoverEvery 4 collects
// coverage for every corpus mutation and for fresh programs 0, 4, 8...
// by their fresh index, still builds a corpus and draws from it, and
// says so in its status.
func TestGuidedSampledCover(t *testing.T) {
	const n = 120
	tg := &countingCover{}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 5, Programs: n, Weights: noThreads(gen.DefaultWeights()),
		Workdir: t.TempDir(), CoverEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	c := st.CoverCounts
	t.Logf("%s; %d of %d runs collected", st.Cover, tg.covered.Load(), tg.runs.Load())
	if c.Corpus == 0 || c.FromCorpus == 0 {
		t.Fatalf("no corpus or no corpus draws: %+v", c)
	}
	fresh := int64(n - c.FromCorpus)
	if want := int64(c.FromCorpus) + (fresh+3)/4; tg.runs.Load() != n || tg.covered.Load() != want {
		t.Errorf("%d runs, %d collected; want %d runs, %d collected (%d corpus mutations, %d fresh programs)",
			tg.runs.Load(), tg.covered.Load(), n, want, c.FromCorpus, fresh)
	}
	if !strings.Contains(st.Cover, "KCOV on one fresh program in 4 and every corpus mutation") {
		t.Errorf("status %q does not say how coverage was sampled", st.Cover)
	}
	// The census (memory states) follows the same rule at its default
	// of one in 4.
	if want := int64(c.FromCorpus) + (fresh+3)/4; tg.censused.Load() != want {
		t.Errorf("%d runs took the census, want %d (%d corpus mutations, %d fresh programs)", tg.censused.Load(), want, c.FromCorpus, fresh)
	}
}

// TestCensusFor: which programs take the page census, by mode and
// origin.
func TestCensusFor(t *testing.T) {
	fresh := func(k int64) Origin { return Origin{Fresh: k} }
	corpus := Origin{Fresh: -1}
	for _, c := range []struct {
		name string
		cfg  Config
		i    int64
		org  Origin
		want bool
	}{
		{"guided, fresh, hit", Config{}, 9, fresh(8), true},
		{"guided, fresh, miss", Config{}, 8, fresh(7), false},
		{"guided, corpus", Config{}, 9, corpus, true},
		{"guided, every 1", Config{CensusEvery: 1}, 9, fresh(7), true},
		{"guided, no census, corpus", Config{CensusEvery: -1}, 8, corpus, false},
		{"guided, edges only, corpus, by index", Config{NoStates: true}, 9, corpus, false},
		{"guided, edges only, by index", Config{NoStates: true}, 8, fresh(7), true},
		{"blind, by index", Config{Blind: true}, 16, fresh(15), true},
		{"blind, off index", Config{Blind: true}, 17, fresh(16), false},
		{"blind, every 10", Config{Blind: true, CensusEvery: 10}, 20, fresh(20), true},
	} {
		if got := c.cfg.CensusFor(c.i, c.org); got != c.want {
			t.Errorf("%s: CensusFor(%d, fresh %d) = %v, want %v", c.name, c.i, c.org.Fresh, got, c.want)
		}
	}
}

// TestCoverFor: which programs collect kernel coverage, by mode and
// origin.
func TestCoverFor(t *testing.T) {
	fresh := func(k int64) Origin { return Origin{Fresh: k} }
	corpus := Origin{Fresh: -1}
	for _, c := range []struct {
		name string
		cfg  Config
		i    int64
		org  Origin
		want bool
	}{
		{"guided, every program", Config{}, 7, corpus, true},
		{"guided, fresh, sampled, hit", Config{CoverEvery: 4}, 9, fresh(8), true},
		{"guided, fresh, sampled, miss", Config{CoverEvery: 4}, 8, fresh(7), false},
		{"guided, corpus, sampled", Config{CoverEvery: 4}, 9, corpus, true},
		{"blind, by index", Config{Blind: true}, 16, fresh(16), true},
		{"blind, off index", Config{Blind: true}, 17, fresh(16), false},
		{"no cover, corpus", Config{NoCover: true}, 0, corpus, false},
		{"no cover, fresh", Config{NoCover: true}, 0, fresh(0), false},
	} {
		if got := c.cfg.CoverFor(c.i, c.org); got != c.want {
			t.Errorf("%s: CoverFor(%d, fresh %d) = %v, want %v", c.name, c.i, c.org.Fresh, got, c.want)
		}
	}
}

// TestCoverRule: the words for which programs collect kernel coverage.
func TestCoverRule(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "KCOV on one fresh program in 4 and every corpus mutation"},
		{Config{CoverEvery: 10}, "KCOV on one fresh program in 10 and every corpus mutation"},
		{Config{CoverEvery: 1}, "KCOV on every program"},
		{Config{Blind: true}, "KCOV on one program in 8"},
		{Config{Blind: true, CoverEvery: 1}, "KCOV on every program"},
		{Config{NoCover: true, CoverEvery: 4}, "no KCOV"},
	} {
		if got := c.cfg.CoverRule(); got != c.want {
			t.Errorf("%+v: CoverRule() = %q, want %q", c.cfg, got, c.want)
		}
	}
}

// imageTarget is coverTarget booting a kernel image (the corpus is named
// after the image's hash).
type imageTarget struct {
	coverTarget
	image string
}

func (i *imageTarget) KernelImage() string   { return i.image }
func (i *imageTarget) KernelRelease() string { return "" }

// TestSeedCorpus: a campaign seeded with another campaign's corpus of the
// same build starts from it (its first programs already mutate corpus
// programs); a seed corpus of another build is an error before any program
// runs.
func TestSeedCorpus(t *testing.T) {
	w := noThreads(gen.DefaultWeights())
	image := filepath.Join(t.TempDir(), "bzImage")
	os.WriteFile(image, []byte("kernel one"), 0o644)
	kept := t.TempDir()
	st, err := Run(context.Background(), Config{Target: &imageTarget{image: image}, Seed: 5, Programs: 60, Weights: w, Workdir: kept})
	if err != nil {
		t.Fatal(err)
	}
	if st.CoverCounts.Corpus < 10 {
		t.Fatalf("the first campaign kept %d programs", st.CoverCounts.Corpus)
	}
	var log testutil.SyncBuffer
	st2, err := Run(context.Background(), Config{Target: &imageTarget{image: image}, Seed: 6, Programs: 20, Weights: w,
		Workdir: t.TempDir(), SeedCorpus: kept, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("coverage: seeded the corpus with %d programs from %s", st.CoverCounts.Corpus, kept)
	if !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
	c := st2.CoverCounts
	if c.Corpus < st.CoverCounts.Corpus || c.Drawn != 20 || c.FromCorpus == 0 {
		t.Errorf("seeded campaign: corpus %d (seed %d), %d of %d programs from the corpus", c.Corpus, st.CoverCounts.Corpus, c.FromCorpus, c.Drawn)
	}

	other := filepath.Join(t.TempDir(), "bzImage")
	os.WriteFile(other, []byte("kernel two"), 0o644)
	_, err = Run(context.Background(), Config{Target: &imageTarget{image: other}, Seed: 6, Programs: 5, Weights: w,
		Workdir: t.TempDir(), SeedCorpus: kept})
	if !errors.Is(err, cover.ErrSeedBuild) {
		t.Errorf("seed corpus of another build: error %v, want cover.ErrSeedBuild", err)
	}
}

// serialCover is coverTarget on one machine, keeping what it ran in order.
type serialCover struct {
	coverTarget
	ran []string
}

func (s *serialCover) Parallel() int { return 1 }
func (s *serialCover) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	s.ran = append(s.ran, string(p.Format()))
	return s.coverTarget.Run(p, opts)
}

// TestGuidedFreshOrder: a guided campaign's corpus mutations come between
// its fresh programs rather than in their place, so it runs the blind
// campaign's generated programs in the same order (before, a corpus draw
// at program i replaced fresh program i for good, and a bug that the
// blind campaign's program 7 finds could be missed by the guided one).
func TestGuidedFreshOrder(t *testing.T) {
	w := noThreads(gen.DefaultWeights())
	tg := &serialCover{}
	st, err := Run(context.Background(), Config{Target: tg, Seed: 5, Programs: 150, Weights: w, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := st.CoverCounts
	if c.FromCorpus < 15 || len(tg.ran) != 150 {
		t.Fatalf("%d of %d programs from the corpus, %d ran: too few to test the order", c.FromCorpus, c.Drawn, len(tg.ran))
	}
	// Fresh program k is generated (not a pool mutation) when
	// NewProgramParent with a non-empty pool gives no parent.
	pool := []*prog.Program{NewProgram(99, 0, nil, w)}
	fresh := int64(150 - c.FromCorpus)
	j, matched := 0, 0
	for k := int64(0); k < fresh; k++ {
		p, parent := NewProgramParent(5, k, pool, w)
		if parent != nil {
			continue
		}
		want := string(p.Format())
		for j < len(tg.ran) && tg.ran[j] != want {
			j++
		}
		if j == len(tg.ran) {
			t.Fatalf("generated fresh program %d is not among the guided campaign's programs in order (%d matched before it)", k, matched)
		}
		matched++
		j++
	}
	t.Logf("%d of %d programs from the corpus; all %d generated programs among the %d fresh ones ran in order", c.FromCorpus, c.Drawn, matched, fresh)
	if matched < 20 {
		t.Errorf("only %d generated fresh programs checked", matched)
	}
}

// TestFindingOrigin: how a program was drawn, when not from its index's
// seed, is kept in the finding's seed file and read back.
func TestFindingOrigin(t *testing.T) {
	dir := t.TempDir()
	store := &FindingStore{Dir: dir}
	if err := store.Open(); err != nil {
		t.Fatal(err)
	}
	f := &Finding{Issue: judge.Issue{Signature: "memory:lost-store", Oracle: "memory"}, Program: NewProgram(1, 0, nil, gen.DefaultWeights()), CampaignSeed: 1, Index: 9,
		ProgramSeed: ProgramSeed(CorpusSeed(1), 9), Origin: "a mutation of corpus program abc from campaign.ProgramSeed(7, 9)"}
	saved, err := store.Save(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(saved, "seed"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\ndrawn "+f.Origin+"\n") {
		t.Errorf("seed file without the origin:\n%s", b)
	}
	rep, err := os.ReadFile(filepath.Join(saved, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rep), "drawn:    "+f.Origin) {
		t.Errorf("report without the origin:\n%s", rep)
	}
}

// TestNoStatesCampaign: with NoStates a guided campaign keeps no memory
// state (the same campaign without it keeps some) and its corpus holds
// only programs that reached new edges.
func TestNoStatesCampaign(t *testing.T) {
	w := noThreads(gen.DefaultWeights())
	with, err := Run(context.Background(), Config{Target: &firstForkCensus{}, Seed: 5, Programs: 60, Weights: w, Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if with.CoverCounts.States == 0 {
		t.Fatalf("the campaign with memory states reached none: the test cannot tell them off")
	}
	dir := t.TempDir()
	var log strings.Builder
	st, err := Run(context.Background(), Config{Target: &firstForkCensus{}, Seed: 5, Programs: 60, Weights: w,
		Workdir: dir, NoStates: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	c := st.CoverCounts
	if c.States != 0 || c.Corpus == 0 {
		t.Errorf("no-states campaign: %d states, corpus %d", c.States, c.Corpus)
	}
	if !strings.Contains(log.String(), "memory states off") {
		t.Errorf("the log does not say memory states are off:\n%s", log.String())
	}
	states, _ := filepath.Glob(filepath.Join(dir, "corpus", "*", "*.states"))
	if len(states) != 0 {
		t.Errorf("no-states campaign kept %d .states files", len(states))
	}
}

// firstForkCensus is coverTarget with a made-up page census at the first
// fork: swapped pages when the program advised a page out before it.
type firstForkCensus struct{ coverTarget }

func (c *firstForkCensus) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	o, err := c.coverTarget.Run(p, opts)
	if err != nil || p.NumForks() == 0 {
		return o, err
	}
	fp := obs.ForkPages{Fork: 0, Present: 1, Flags: true, Mlocked: 1}
	for _, op := range p.Ops[:p.ForkOp(0)] {
		if op.Kind == prog.OpMadvise && op.Advice == prog.AdvPageout {
			fp.Swapped = 1
		}
	}
	o.ForkPages = append(o.ForkPages, fp)
	return o, nil
}

// symTarget is imageTarget answering a request for the kernel's symbols,
// and counting the requests.
type symTarget struct {
	imageTarget
	asked int
}

func (s *symTarget) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	o, err := s.imageTarget.Run(p, opts)
	if opts.Symbols && o != nil && o.Cover.Available() {
		s.asked++
		o.Cover.Symbols = "ffffffff81000000 T _stext\nffffffff81100000 T dup_mmap\nffffffff81100900 T schedule\n"
	}
	return o, err
}

// TestSymbolsAskedOncePerImage: the first campaign on an image asks the
// target for the kernel's symbols (seconds of reading /proc/kallsyms in a
// TCG guest) on its first program; a later campaign on the same image, in
// another workdir, takes them from the cache and never asks; another
// image is asked again.
func TestSymbolsAskedOncePerImage(t *testing.T) {
	t.Setenv("FORKFUZZ_CACHE", t.TempDir())
	w := noThreads(gen.DefaultWeights())
	dir := t.TempDir()
	one, two := filepath.Join(dir, "bzImage-1"), filepath.Join(dir, "bzImage-2")
	os.WriteFile(one, []byte("kernel one"), 0o644)
	os.WriteFile(two, []byte("kernel two"), 0o644)
	for i, tc := range []struct {
		image string
		asked int
		log   string
	}{
		{one, 1, ""},
		{one, 0, "coverage: the kernel's symbols from "},
		{two, 1, ""},
	} {
		var log testutil.SyncBuffer
		tg := &symTarget{imageTarget: imageTarget{image: tc.image}}
		st, err := Run(context.Background(), Config{Target: tg, Seed: 5, Programs: 6, Weights: w, Workdir: t.TempDir(), Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		if tg.asked != tc.asked || !st.CoverCounts.Symbols {
			t.Errorf("campaign %d: asked for symbols %d times, want %d; counts %+v", i, tg.asked, tc.asked, st.CoverCounts)
		}
		if tc.log != "" && !strings.Contains(log.String(), tc.log) {
			t.Errorf("campaign %d: log lacks %q:\n%s", i, tc.log, log.String())
		}
	}
}
