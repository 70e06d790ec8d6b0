package cover

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The schedule decides, program by program, whether a guided campaign
// mutates a corpus program or makes a fresh one (generated, or mutated
// from the campaign's pool), by what each source has found per second
// of target time lately. A fixed half-and-half split lost to blind
// campaigns on the reference kernel (docs/coverage.md): while fresh
// programs still reach new code at almost every run, mutating the corpus
// only replaces them. The schedule starts at a quarter from the corpus
// and moves the share toward the source that pays, within [10%, 67%]:
// at least a third of the programs stay fresh, and since corpus draws
// come between fresh programs rather than in their place (campaign's
// Origin), a guided campaign runs any fresh program of a blind one by at
// most three times its index. A kept corpus of 20895 edges held the share
// at 30-70% and, with draws that replaced fresh programs, missed two
// planted bugs that the blind campaign's 6th and 7th programs found.
const (
	minShare   = 0.10
	maxShare   = 2.0 / 3
	startShare = 0.25
	// decay: each credited program ages both sources' history (a
	// half-life of about 23 programs).
	decay = 0.97
)

// From is where a program came from: a corpus entry's index, or Fresh.
type From int

// Fresh: generated, or mutated from the pool, not from the corpus.
const Fresh From = -1

type source struct{ gain, secs, n float64 } // decayed sums

type schedule struct {
	src      [2]source // 0: fresh, 1: corpus
	fromCorp int       // programs drawn from the corpus
	drawn    int
}

// gain is what a program found, on the corpus weight's scale: a new
// finding counts as much as a program that reached 2^16 new edges, or
// 16 new fork/mm PCs (what the campaign is for, and rare: it should
// pull the share toward its source).
func gain(g Gain) float64 {
	return float64(bits.Len(uint(g.NewEdges)) + 4*bits.Len(uint(g.NewMM)) + 2*bits.Len(uint(g.NewStates)) + findingGain*g.NewFindings)
}

const findingGain = 16

// priorRuns is the weight of the prior, in runs of average length and
// gain (both sources' recent average): fresh programs are assumed to pay
// 1.5 times the average and corpus mutations 0.5 times, until the runs
// say otherwise. Early in a campaign every program finds thousands of
// edges; a prior on that scale keeps one lucky corpus mutation from
// swinging the share to its bound (the first credited program moves it
// from 25% to 33% at most). The prior also keeps a source that finds
// nothing from being written off: a rarely drawn source's rate stays
// near its prior, so the share settles within about [10%, 75%].
const priorRuns = 1

// share is the probability that the next program comes from the corpus.
func (s *schedule) share() float64 {
	n := s.src[0].n + s.src[1].n
	if n == 0 { // nothing credited yet
		return startShare
	}
	meanGain := (s.src[0].gain + s.src[1].gain) / n
	meanSecs := (s.src[0].secs + s.src[1].secs) / n
	if meanSecs <= 0 {
		meanSecs = 1e-9
	}
	rate := func(k int, prior float64) float64 {
		return (s.src[k].gain + priorRuns*prior*meanGain + 1e-9) / (s.src[k].secs + priorRuns*meanSecs)
	}
	fresh, corp := rate(0, 1.5), rate(1, 0.5)
	sh := corp / (corp + fresh)
	return min(maxShare, max(minShare, sh))
}

func (s *schedule) credit(fromCorpus bool, ran time.Duration, g float64) {
	for i := range s.src {
		s.src[i].gain *= decay
		s.src[i].secs *= decay
		s.src[i].n *= decay
	}
	k := 0
	if fromCorpus {
		k = 1
	}
	s.src[k].gain += g
	s.src[k].secs += ran.Seconds()
	s.src[k].n++
}

// Draw decides where the next program comes from: a corpus entry to
// mutate (drawn by weight, fewer times the more it was drawn before, more
// the more its mutations found, and more the cheaper it runs: runCost),
// or Fresh. A blind tracker, or one
// with an empty corpus, always says Fresh.
func (t *Tracker) Draw(r *rand.Rand) From {
	if !t.Guided || len(t.entries) == 0 {
		return Fresh
	}
	t.sched.drawn++
	if r.Float64() >= t.sched.share() {
		return Fresh
	}
	t.sched.fromCorp++
	meanCost := 0.0
	for i := range t.entries {
		meanCost += float64(runCost(t.entries[i].Prog))
	}
	meanCost /= float64(len(t.entries))
	w := make([]float64, len(t.entries))
	total := 0.0
	for i := range t.entries {
		e := &t.entries[i]
		w[i] = float64(e.energy()) * min(maxCostFactor, max(1/maxCostFactor, meanCost/float64(runCost(e.Prog))))
		total += w[i]
	}
	x := r.Float64() * total
	for i := range t.entries {
		if x < w[i] || i == len(t.entries)-1 {
			t.entries[i].Picks++
			return From(i)
		}
		x -= w[i]
	}
	panic("cover: draw from an empty corpus")
}

// maxCostFactor bounds how much an entry's run cost moves its draws: a
// program that costs a quarter of the corpus's mean is drawn up to 4
// times as often, one that costs four times the mean a quarter as often
// (AFL's performance score does the same with a program's run time).
// Guided campaigns on the reference kernel ran programs 1.2x as long as
// blind ones (4.91 s against 4.13 s, docs/coverage.md): the corpus keeps
// what reached new code, and large regions forked several times reach
// the most, then every mutation of them pays their forks and views.
const maxCostFactor = 4.0

// runCost estimates what running p costs, from the program alone (so a
// campaign's draws replay from its seed): its pages, scanned by every
// view and copied by every fork, times the processes that fork and view
// them.
func runCost(p *prog.Program) int {
	if p == nil {
		return 1
	}
	pages := 0
	for _, r := range p.Regions {
		pages += r.Pages
	}
	return max(1, pages) * (1 + p.NumForks())
}

// energy is an entry's weight for Draw: its corpus weight plus 4 per
// mutation of it that found new edges, halved by its first 16 draws,
// thirded by 32 (in 64ths, so that worn entries keep some chance).
func (e *Entry) energy() int {
	return max(1, (e.Weight+4*e.Hits)*64/(16+e.Picks))
}

// Program returns the corpus program f names (nil for Fresh).
func (t *Tracker) Program(f From) *prog.Program {
	if f < 0 || int(f) >= len(t.entries) {
		return nil
	}
	return t.entries[f].Prog
}

// EntryName returns the file name (without extension) of the corpus
// program f names ("" for Fresh).
func (t *Tracker) EntryName(f From) string {
	if f < 0 || int(f) >= len(t.entries) {
		return ""
	}
	return t.entries[f].Name
}

// Credit tells the schedule what a program from f found (g, from Add) in
// the target time it ran.
func (t *Tracker) Credit(f From, ran time.Duration, g Gain) {
	if f >= 0 && int(f) < len(t.entries) && (g.NewEdges > 0 || g.NewStates > 0 || g.NewFindings > 0) {
		t.entries[f].Hits++
	}
	t.sched.credit(f >= 0, ran, gain(g))
}

// scheduleStatus is the schedule's part of the status line.
func (t *Tracker) scheduleStatus() string {
	if !t.Guided {
		return "blind"
	}
	return fmt.Sprintf("guided, %d%% from corpus", int(100*t.sched.share()+0.5))
}
