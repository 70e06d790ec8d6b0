package gate

import (
	"fmt"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Fresh-VM validation (issue 29): at the end of the gate each finding
// that counts against the kernel is replayed on a freshly opened target
// (a new boot on QEMU, a new instance on the simulated and native
// targets), one target per replay, until freshWant replays showed its
// signature or freshMax ran. Reproducible takes freshWant of at most
// freshMax; anything less is flaky with its rate.
const (
	freshWant = 2
	freshMax  = 5
)

// FreshReplay is what the replays of a finding's reproducer on fresh
// targets showed.
type FreshReplay struct {
	Runs       int    `json:"runs"`
	Reproduced int    `json:"reproduced"`
	Note       string `json:"note,omitempty"`
	// OffSite counts runs that did not show it while a fork's injected
	// fault hit another allocation than in the finding's run (a fresh
	// executor's own mappings move fail_nth's K-th point): they tested
	// something else and are not in Runs.
	OffSite int `json:"off_site,omitempty"`
	// Aimed says at which failure point the reproducer's fault hit the
	// recorded site on fresh targets, when its own did not (each off-site
	// run moves it one step, campaign.Nearby).
	Aimed string `json:"aimed,omitempty"`
}

// freshVerdict is the reproducibility a fresh validation gives, or ""
// when it did not run.
func (f *FindingRecord) freshVerdict() string {
	v := f.Fresh
	switch {
	case v == nil:
		return ""
	case v.Runs == 0 && v.Note == "" && v.OffSite > 0:
		return fmt.Sprintf("not validated on fresh VMs (all %d runs injected their fault at another allocation than the finding's run)", v.OffSite)
	case v.Runs == 0:
		return "not validated on fresh VMs (" + v.Note + ")" + v.offSiteNote()
	case v.Reproduced >= freshWant:
		return fmt.Sprintf("reproducible %d/%d on fresh VMs", v.Reproduced, v.Runs) + v.offSiteNote()
	}
	s := fmt.Sprintf("flaky %d/%d on fresh VMs (reproducible takes %d)", v.Reproduced, v.Runs, freshWant)
	if v.Reproduced == v.Runs {
		// Every run showed it, too few of them to say reproducible.
		s = fmt.Sprintf("shown %d/%d on fresh VMs, too few runs to say reproducible (takes %d)", v.Reproduced, v.Runs, freshWant)
	}
	if v.Note != "" {
		s += "; " + v.Note
	}
	return s + v.offSiteNote()
}

// offSiteNote says how many runs hit another fault site, if any.
func (v *FreshReplay) offSiteNote() string {
	if v.OffSite == 0 {
		return ""
	}
	s := fmt.Sprintf("; %d more runs injected their fault at another allocation than the finding's run and were not counted", v.OffSite)
	if v.Aimed != "" {
		s += " (" + v.Aimed + ")"
	}
	return s
}

// freshShare is what the fuzz phase leaves for the fresh validation: an
// eighth of what is left.
func freshShare(left time.Duration) time.Duration { return left / 8 }

// fresh validates every finding that counts against the kernel on fresh
// targets until the hard stop (it runs after the baseline phase: a
// finding the baseline showed is pre-existing and not replayed here).
func (g *gate) fresh(ph *Phase) {
	var todo []*FindingRecord
	for i := range g.res.Findings {
		f := &g.res.Findings[i]
		if f.reproProg == nil {
			continue
		}
		if k, _ := g.cfg.Known.Match(f.Signature, g.res.Kernel.Release, g.res.Kernel.Target, g.now()); k != nil {
			continue
		}
		if b := f.Baseline; b != nil && b.Reproduced > 0 {
			continue // pre-existing: it does not count against the kernel
		}
		if tr, hang := isTrouble(f); tr {
			if st, _ := troubleStatus(f, hang); st != StatusNew {
				continue
			}
		}
		todo = append(todo, f)
	}
	if len(todo) == 0 {
		ph.Skipped = "no finding to validate"
		return
	}
	stop := g.hard
	var notes []string
	for _, f := range todo {
		v := &FreshReplay{}
		f.Fresh = v
		g.freshRuns(f, v, stop)
		notes = append(notes, fmt.Sprintf("%s: %d/%d on fresh targets%s", f.Signature, v.Reproduced, v.Runs, strings.TrimSuffix("; "+v.Note, "; ")))
	}
	ph.Note = strings.Join(notes, "\n")
}

// freshRuns replays f's reproducer, one fresh target per run. The phase
// is the last to run programs, so time it does not use is not used at
// all: a run starts while the time left holds the longest run seen (the
// first: the longest corpus replay), and an open or a run still going at
// the stop is abandoned (its target closed), so the phase ends with the
// budget. A saved VM state makes a fresh open take a second or two where
// the boot phase may have been a cold boot.
func (g *gate) freshRuns(f *FindingRecord, v *FreshReplay, stop time.Time) {
	longest := time.Second
	for _, c := range g.res.Corpus {
		longest = max(longest, time.Duration(c.Seconds*float64(time.Second)))
	}
	// A fresh executor's mappings move a fault's K-th failure point
	// alike on every fresh target: an off-site run moves the one fault's
	// K a step (campaign.Nearby) for the next target, until a run hits
	// the recorded site; later runs keep that K.
	p, aim, step, aimed := f.reproProg, campaign.Fault{Op: -1}, 0, false
	if len(f.sites) == 1 {
		for a := range f.sites {
			aim = a
		}
	}
	tries := 2 * freshMax
	if aim.Op >= 0 {
		tries += campaign.AimRuns
	}
	for k := 0; k < tries && v.Runs < freshMax && v.Reproduced < freshWant; k++ {
		if g.ctx.Err() != nil {
			v.Note = "interrupted"
			return
		}
		if left := time.Until(stop); left < longest+time.Second/2 {
			v.Note = fmt.Sprintf("budget spent: %v left, a run took up to %v", left.Round(100*time.Millisecond), longest.Round(100*time.Millisecond))
			return
		}
		open := g.cfg.OpenFresh
		if open == nil {
			open = g.cfg.Open
		}
		t, err := g.openBy(open, stop)
		if err != nil {
			v.Note = "opening a fresh target: " + err.Error()
			return
		}
		t0 := time.Now()
		b := &budgetTarget{Target: t}
		b.setStop(stop)
		o, err := runBy(b, p, f.RunMode.options(g.cfg.Corrupt), stop)
		longest = max(longest, time.Since(t0))
		if err == errBudget {
			v.Note = fmt.Sprintf("budget spent during a replay (abandoned after %v)", time.Since(t0).Round(100*time.Millisecond))
			return
		}
		res, herr := judge.Judge(p, o, err)
		if herr != nil {
			v.Note = "replay: " + herr.Error()
			continue
		}
		back, _ := campaign.CameBack(f.Signature, res)
		if !back && o != nil && len(f.sites) > 0 && !campaign.OnSite(o, f.sites) {
			v.OffSite++
			for !aimed && aim.Op >= 0 {
				step++
				if step > campaign.AimRuns {
					// Every K nearby missed: further runs would too.
					v.Note = fmt.Sprintf("no K within %d of the reproducer's hit the recorded site", campaign.AimRuns/2)
					return
				}
				if q := campaign.Nearby(f.reproProg, aim, step); q != nil {
					p = q
					break
				}
			}
			continue
		}
		if !aimed && p != f.reproProg {
			v.Aimed = fmt.Sprintf("aimed: %s=%d hits the recorded site on fresh targets", aim.Attr(), aim.K(p))
		}
		aimed = true
		v.Runs++
		if back {
			v.Reproduced++
		}
	}
}

// runBy runs p on t and closes t; a run still going at stop is abandoned
// (t closed in the background, which ends the run) and errBudget returned.
func runBy(t agents.Target, p *prog.Program, opt agents.Options, stop time.Time) (*obs.Observation, error) {
	type res struct {
		o   *obs.Observation
		err error
	}
	ch := make(chan res, 1)
	go func() {
		o, err := t.Run(p, opt)
		ch <- res{o, err}
	}()
	timer := time.NewTimer(max(time.Until(stop), 0))
	defer timer.Stop()
	select {
	case r := <-ch:
		closeWithin(t, min(max(time.Until(stop), time.Second), 30*time.Second))
		return r.o, r.err
	case <-timer.C:
		go func() {
			t.Close()
			<-ch
		}()
		return nil, errBudget
	}
}
