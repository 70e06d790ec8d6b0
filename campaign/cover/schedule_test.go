package cover

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// corpusTracker is a guided tracker holding n corpus programs.
func corpusTracker(t *testing.T, n int) *Tracker {
	t.Helper()
	tr, err := Open(t.TempDir(), "k", true, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		p := mustParse(t, fmt.Sprintf("forkfuzz v1\nregion r0 anon-private pages=%d\nfork f0\nwait f0\n", i+1))
		if g, err := tr.Add(p, &obs.Coverage{PCs: []uint64{uint64(i + 1)}, Edges: []uint32{uint32(i + 1)}}); err != nil || g.NewEdges != 1 {
			t.Fatalf("entry %d: %+v, %v", i, g, err)
		}
	}
	return tr
}

// TestScheduleFollowsYield: the share of programs drawn from the corpus
// moves toward the source that finds more per second, and stays within
// its bounds whatever the history; one lucky first program does not
// swing it.
func TestScheduleFollowsYield(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		freshGain, corpusGain   Gain
		freshTime, corpusTime   time.Duration
		wantAtLeast, wantAtMost float64
	}{
		{"fresh pays", Gain{NewEdges: 300, NewMM: 40}, Gain{}, 10 * time.Second, 10 * time.Second, minShare, 0.12},
		{"corpus pays", Gain{}, Gain{NewEdges: 300, NewMM: 40}, 10 * time.Second, 10 * time.Second, 0.6, maxShare},
		{"equal finds, corpus twice as fast", Gain{NewEdges: 100}, Gain{NewEdges: 100}, 20 * time.Second, 10 * time.Second, 0.6, maxShare},
		{"nothing found anywhere", Gain{}, Gain{}, time.Second, time.Second, 0.2, 0.5},
		{"corpus finds bugs, fresh finds a few edges", Gain{NewEdges: 7}, Gain{NewFindings: 1}, 10 * time.Second, 10 * time.Second, 0.6, maxShare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := corpusTracker(t, 4)
			r := rand.New(rand.NewPCG(7, 7))
			for i := 0; i < 400; i++ {
				f := tr.Draw(r)
				if s := tr.sched.share(); s < minShare || s > maxShare {
					t.Fatalf("share %.3f out of [%v, %v] after %d programs", s, minShare, maxShare, i)
				}
				if f == Fresh {
					tr.Credit(f, tc.freshTime, tc.freshGain)
				} else {
					tr.Credit(f, tc.corpusTime, tc.corpusGain)
				}
			}
			if s := tr.sched.share(); s < tc.wantAtLeast || s > tc.wantAtMost {
				t.Errorf("share %.3f after 400 programs, want [%v, %v]", s, tc.wantAtLeast, tc.wantAtMost)
			}
		})
	}
}

// TestDrawEnergy: an entry drawn often without its mutations finding
// anything is drawn less than one whose mutations found new edges.
func TestDrawEnergy(t *testing.T) {
	tr := corpusTracker(t, 2)
	tr.entries[0].Picks = 40
	tr.entries[1].Hits = 3
	// Draw from the corpus (the share's upper bound).
	tr.sched.src[1] = source{gain: 1e6, secs: 1, n: 1}
	tr.sched.src[0] = source{gain: 0, secs: 100, n: 100}
	r := rand.New(rand.NewPCG(3, 3))
	n := [2]int{}
	for i := 0; i < 100; i++ {
		if f := tr.Draw(r); f != Fresh {
			n[f]++
		}
	}
	// Energy wears with every draw, so the productive entry's lead
	// shrinks as it is drawn.
	if n[0]+n[1] < 55 || n[1] < 3*n[0] {
		t.Errorf("draws: worn-out entry %d, productive entry %d (of 100)", n[0], n[1])
	}
	t.Logf("draws: worn-out entry %d, productive entry %d (of 100)", n[0], n[1])
}

// TestScheduleFirstLuckyProgram: the first credited program came from the
// corpus and found thousands of edges (as every early program does): the
// share moves a little, not to its bound.
func TestScheduleFirstLuckyProgram(t *testing.T) {
	tr := corpusTracker(t, 2)
	tr.Credit(0, 10*time.Second, Gain{NewEdges: 8000, NewMM: 2700})
	if s := tr.sched.share(); s < startShare || s > 0.34 {
		t.Errorf("share %.3f after one lucky corpus program, want within [%v, 0.34]", s, startShare)
	}
}

// TestCreditFinding: a corpus entry whose mutation showed a new finding
// (and no new edge) counts as productive for Draw.
func TestCreditFinding(t *testing.T) {
	tr := corpusTracker(t, 2)
	tr.Credit(1, time.Second, Gain{NewFindings: 1})
	tr.Credit(0, time.Second, Gain{})
	if tr.entries[1].Hits != 1 || tr.entries[0].Hits != 0 {
		t.Errorf("hits after a finding and a blank: %d, %d; want 1, 0", tr.entries[1].Hits, tr.entries[0].Hits)
	}
	if g := gain(Gain{NewFindings: 1}); g <= gain(Gain{NewEdges: 1 << 12}) {
		t.Errorf("a new finding weighs %v, 4096 new edges %v", g, gain(Gain{NewEdges: 1 << 12}))
	}
}

// TestDrawCost: of two entries alike but for their size, the cheaper is
// drawn more, and the dearer still drawn (the factor is bounded).
func TestDrawCost(t *testing.T) {
	tr, err := Open(t.TempDir(), "k", true, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, pages := range []int{8, 4096} {
		p := mustParse(t, fmt.Sprintf("forkfuzz v1\nregion r0 anon-private pages=%d\nfork f0\nwait f0\n", pages))
		if _, err := tr.Add(p, &obs.Coverage{PCs: []uint64{uint64(i + 1)}, Edges: []uint32{uint32(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	tr.entries[1].Weight = tr.entries[0].Weight
	tr.sched.src[1] = source{gain: 1e6, secs: 1, n: 1}
	tr.sched.src[0] = source{gain: 0, secs: 100, n: 100}
	r := rand.New(rand.NewPCG(5, 5))
	n := [2]int{}
	for i := 0; i < 400; i++ {
		if f := tr.Draw(r); f != Fresh {
			n[f]++
		}
		tr.entries[0].Picks, tr.entries[1].Picks = 0, 0 // energy alike
	}
	// Costs 16 and 8192 against a mean of 4104: factors 4 and 1/2.
	if n[0] < 4*n[1] || n[1] == 0 {
		t.Errorf("draws: 8-page entry %d, 4096-page entry %d; want the small one about 8 times as often, the large one drawn", n[0], n[1])
	}
	t.Logf("draws: 8-page entry %d, 4096-page entry %d", n[0], n[1])
}
