package campaign

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
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
