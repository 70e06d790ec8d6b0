package campaign

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// coverTarget is modelTarget with made-up kernel coverage: one "PC" per
// operation kind and one edge per pair of consecutive operations, so
// that new combinations of operations are new edges.
type coverTarget struct{ modelTarget }

func (c *coverTarget) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	o, _ := c.modelTarget.Run(p, opts)
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

// imageTarget is coverTarget booting a kernel image (the corpus is named
// after the image's hash).
type imageTarget struct {
	coverTarget
	image string
}

func (i *imageTarget) KernelImage() string { return i.image }

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
