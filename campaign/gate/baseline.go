package gate

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// startBaseline opens the baseline in the background from the start of
// the gate (a QEMU boot takes as long as the kernel under test's), so the
// baseline phase only replays.
func (g *gate) startBaseline() {
	ch := make(chan baselineOpen, 1)
	g.baseCh = ch
	go func() {
		t0 := time.Now()
		t, err := g.cfg.OpenBaseline()
		ch <- baselineOpen{t, err, time.Since(t0)}
	}()
}

type baselineOpen struct {
	t    agents.Target
	err  error
	took time.Duration
}

// takeBaseline waits for the baseline target to come up (once; the
// baseline and fixes phases share it, closeBaseline closes it).
func (g *gate) takeBaseline() (agents.Target, error) {
	if g.baseT != nil || g.baseErr != nil {
		return g.baseT, g.baseErr
	}
	ch := g.baseCh
	g.baseCh = nil
	if ch == nil {
		g.baseErr = errors.New("no baseline")
		return nil, g.baseErr
	}
	var bo baselineOpen
	timer := time.NewTimer(time.Until(g.hard))
	defer timer.Stop()
	select {
	case bo = <-ch:
	case <-timer.C:
		bo.err = fmt.Errorf("the baseline did not come up within the budget")
	case <-g.ctx.Done():
		bo.err = fmt.Errorf("interrupted while the baseline booted")
	}
	if bo.err != nil {
		go func() {
			if r := <-ch; r.t != nil {
				r.t.Close()
			}
		}()
		g.baseErr = bo.err
		return nil, bo.err
	}
	g.baseT, g.baseOpen = bo.t, bo
	if g.res.Baseline != nil && (g.res.Baseline.Target == "" || g.res.Baseline.Target == "qemu") {
		g.res.Baseline.Target = bo.t.Name()
	}
	if g.res.Baseline != nil && g.res.Baseline.Release == "" {
		g.res.Baseline.Release = bo.t.Name()
	}
	return bo.t, nil
}

// closeBaseline closes the baseline target (taken or still coming up).
func (g *gate) closeBaseline() {
	if g.baseT != nil {
		closeWithin(g.baseT, 5*time.Second)
		g.baseT = nil
	}
	if g.baseCh == nil {
		return
	}
	ch := g.baseCh
	g.baseCh = nil
	select {
	case r := <-ch:
		if r.t != nil {
			closeWithin(r.t, 5*time.Second)
		}
	default:
		go func() {
			if r := <-ch; r.t != nil {
				r.t.Close()
			}
		}()
	}
}

// baseRepro is one distinct reproducer of the baseline phase and what
// its runs on the baseline showed.
type baseRepro struct {
	p      *prog.Program
	mode   RunMode         // run as the findings' runs were (FindingRecord.RunMode)
	sigs   map[string]bool // the signatures of findings it stands for
	shown  map[string]int  // signature -> runs that showed it
	runs   int             // runs judged (the baseline did not break first)
	judged int             // every judged run, also those it broke in
	tries  int
	// broke counts, per finding signature, the runs the baseline
	// broke in first (no observation, other signatures: other).
	broke map[string]int
	other map[string]bool
	// as: a hang finding's signature -> the other hang it came back
	// as (campaign.CameBack), the first one.
	as   map[string]string
	note string
	// sites: where the finding's run injected its forks' faults; runs
	// that passed with a fault elsewhere are offSite (not in runs), and
	// the first aims p at the sites (aimed).
	sites    campaign.Sites
	offSiteN int
	aimed    bool
	// timeout is each run's program timeout (0: the target's): a hang
	// finding's confirm timeout.
	timeout time.Duration
}

// offSite says whether a passing baseline run (observation o) injected
// a fork's fault at another allocation than the finding's run did: such
// a run tests something else and is not counted. The first one aims r's
// program at the recorded sites on baseline b (campaign.Aim).
func (r *baseRepro) offSite(g *gate, b agents.Target, o *obs.Observation) bool {
	if len(r.sites) == 0 || campaign.OnSite(o, r.sites) {
		return false
	}
	r.offSiteN++
	if !r.aimed {
		r.aimed = true
		// Aiming runs on the baseline are not counted either way: one
		// that showed the finding's signature with its fault elsewhere
		// says the baseline fails there, not that it has this bug (the
		// note says what they showed).
		a := campaign.AimJudged(g.ctx, b, r.p, r.sites, r.mode.options(g.cfg.Corrupt), campaign.AimRuns)
		r.p = a.Prog
		r.note = appendNote(r.note, "on the baseline: "+a.Note)
	}
	return true
}

// shownBy is the signatures run v shows for r: v's own, and the
// signature of each of r's hang findings that came back as another hang
// (campaign.CameBack).
func (r *baseRepro) shownBy(v *judge.Verdict) []string {
	sigs := v.Signatures()
	for s := range r.sigs {
		if back, as := campaign.CameBack(s, v); back && as != s {
			sigs = append(sigs, s)
			if r.as[s] == "" {
				r.as[s] = as
			}
		}
	}
	return sigs
}

// baseline replays every reproducer not already known on the baseline
// kernel, in rounds of one run each, up to BaselineReplays runs; a
// reproducer that shows its finding's signature there once is settled:
// the finding is pre-existing.
func (g *gate) baseline(ph *Phase) {
	todo := g.baselineTodo()
	if len(todo) == 0 {
		ph.Skipped = "no finding to compare"
		return
	}
	bt, err := g.takeBaseline()
	if err != nil {
		ph.Error = "opening the baseline: " + err.Error()
		return
	}
	bo := g.baseOpen
	b := &budgetTarget{Target: bt}
	b.setStop(g.hard)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		select {
		case <-g.ctx.Done():
			b.setStop(time.Now())
		case <-stopWatch:
		}
	}()
	order, rs := g.baseRepros(todo)
	settled := func(r *baseRepro) bool {
		for s := range r.sigs {
			if r.shown[s] < baselineNeed(s) {
				return false
			}
		}
		return true
	}
	total := 0
	// A run the baseline breaks in before the program can be judged (a
	// kernel BUG with another signature) is inconclusive: it does not
	// count as a run that passed; up to twice BaselineReplays tries.
rounds:
	for k := 0; k < 2*g.cfg.BaselineReplays; k++ {
		for _, h := range order {
			r := rs[h]
			if settled(r) || r.runs >= g.cfg.BaselineReplays || r.tries > k {
				continue
			}
			r.tries++
			opt := r.mode.options(g.cfg.Corrupt)
			opt.Timeout = r.timeout
			o, err := b.Run(r.p, opt)
			v, herr := judge.Judge(r.p, o, err)
			if herr != nil {
				if errors.Is(herr, errBudget) {
					for _, r := range rs {
						if !settled(r) && r.runs < g.cfg.BaselineReplays {
							r.note = fmt.Sprintf("baseline replays cut short after %d runs: budget spent", r.runs)
						}
					}
					break rounds
				}
				r.note = "harness error on the baseline: " + herr.Error()
				continue
			}
			total++
			sigs := r.shownBy(v)
			if o != nil && len(sigs) == 0 && r.offSite(g, b, o) {
				continue
			}
			r.judged++
			for _, s := range sigs {
				r.shown[s]++
			}
			if o == nil {
				// Broke first: inconclusive for the signatures it did
				// not show.
				for s := range r.sigs {
					if !slices.Contains(sigs, s) {
						r.broke[s]++
					}
				}
				for _, s := range sigs {
					r.other[s] = true
				}
				continue
			}
			r.runs++
		}
	}
	g.recordBaseline(todo, rs)
	ph.Note = fmt.Sprintf("baseline %s up in %v (booted in the background from the start); %d distinct reproducers of %d findings, %d runs (up to %d each, stopping at the first reproduction)",
		bt.Name(), bo.took.Round(time.Millisecond), len(order), len(todo), total, g.cfg.BaselineReplays)
}

// baselineTodo lists the findings the baseline phase replays: those no
// known-issue entry matches, and no harness trouble that did not come
// back on the kernel under test (it is not the kernel's: nothing to
// compare).
func (g *gate) baselineTodo() []int {
	var todo []int
	for i := range g.res.Findings {
		f := &g.res.Findings[i]
		if k, _ := g.cfg.Known.Match(f.Signature, g.res.Kernel.Release, g.res.Kernel.Target, g.now()); k != nil {
			continue
		}
		if _, hang := isTrouble(f); trouble(f) {
			if st, _ := troubleStatus(f, hang); st != StatusNew {
				continue
			}
		}
		todo = append(todo, i)
	}
	return todo
}

// baseRepros groups findings todo by reproducer (baselineKey): the
// distinct reproducers in the order of their findings, and each one's
// replay state.
func (g *gate) baseRepros(todo []int) (order []string, rs map[string]*baseRepro) {
	rs = map[string]*baseRepro{}
	for _, i := range todo {
		f := &g.res.Findings[i]
		h := baselineKey(f)
		r, ok := rs[h]
		if !ok {
			r = &baseRepro{p: f.reproProg, mode: f.RunMode, sigs: map[string]bool{}, shown: map[string]int{}, broke: map[string]int{}, other: map[string]bool{}, as: map[string]string{},
				sites: f.sites}
			rs[h] = r
			order = append(order, h)
		}
		r.sigs[f.Signature] = true
		if _, hang := isTrouble(f); hang {
			// A hang counts against the kernel under test only if it
			// came back with a longer timeout (confirm): the baseline
			// gets the same, or a slow run there would make it
			// pre-existing.
			to := g.confirmTimeout(f.Signature)
			if c := f.Confirm; c != nil && c.TimeoutS > 0 {
				to = time.Duration(c.TimeoutS * float64(time.Second))
			}
			r.timeout = max(r.timeout, to)
		}
	}
	return order, rs
}

// recordBaseline writes what the baseline's replays of reproducers rs
// showed into findings todo (Finding.Baseline).
func (g *gate) recordBaseline(todo []int, rs map[string]*baseRepro) {
	for _, i := range todo {
		f := &g.res.Findings[i]
		r := rs[baselineKey(f)]
		repro := f.Program
		if f.Minimized != "" {
			repro = f.Minimized
		}
		f.Baseline = &BaselineReplay{Runs: r.runs, Reproduced: r.shown[f.Signature], Command: g.replayCmd(repro, true, f.RunMode), Note: r.note, OffSite: r.offSiteN, Judged: r.judged}
		if as := r.as[f.Signature]; as != "" {
			f.Baseline.Note = strings.TrimPrefix(f.Baseline.Note+"; the hang came back as "+as, "; ")
		}
		if n := r.broke[f.Signature]; n > 0 && f.Baseline.Reproduced == 0 {
			f.Baseline.Inconclusive = n
			for s := range r.other {
				f.Baseline.Other = append(f.Baseline.Other, s)
			}
			sort.Strings(f.Baseline.Other)
		}
	}
}

// baselineNeed is how many baseline runs must show a finding of
// signature sig for it to be pre-existing: one for a kernel report, two
// for harness trouble (an executor death or hang, a VM that went quiet,
// a stall under TCG), which a loaded host can cause once on any kernel:
// one such run on the baseline must not clear a kernel under test on
// which it came back.
func baselineNeed(sig string) int {
	if t, _ := troubleKind(sig); t {
		return 2
	}
	return 1
}

// baselineKey groups findings whose reproducer is one program run one
// way: each group is replayed once a round on the baseline.
func baselineKey(f *FindingRecord) string {
	return fmt.Sprintf("%s %+v", progHash(f.reproProg), f.RunMode)
}
