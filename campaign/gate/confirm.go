package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
	"github.com/forkfuzz/forkfuzz/kernel/report"
)

// Harness trouble is an event that says the executor or the VM stopped
// answering: an executor death or hang, a lost connection, a VM that sent
// nothing (no kernel report on the console). It may be the kernel's
// doing or the harness's (a slow program on a loaded TCG guest, the
// executor's own bug): the gate blames the kernel only when it comes
// back on a replay, and a hang only when it comes back with a longer
// timeout than the one it ran out of. Trouble that was never replayed is
// an error of the gate (exit 2), never a finding against the kernel.

// troubleKind is campaign.HarnessTrouble, and a stall the kernel
// reported (an RCU stall, a hung task, a soft or hard lockup:
// kernel-hang/INFO-...): on a loaded host a TCG guest's vCPUs can go
// without the host's CPU long enough for the kernel to report one, so
// the gate blames the kernel for a stall only when it comes back on a
// replay, as for an executor death.
func troubleKind(sig string) (trouble, hang bool) {
	if t, h := campaign.HarnessTrouble(sig); t {
		return t, h
	}
	return kernelStall(sig), false
}

// kernelStall: sig is a stall the kernel reported on its console.
func kernelStall(sig string) bool { return oracle.FromSignature(sig) == oracle.KernelHang }

// isTrouble: f is harness trouble with no kernel report on its console
// (a stall: no report but stalls).
func isTrouble(f *FindingRecord) (trouble, hang bool) {
	trouble, hang = troubleKind(f.Signature)
	if !trouble {
		return false, false
	}
	if kernelStall(f.Signature) {
		b, _ := os.ReadFile(filepath.Join(f.Dir, "console.txt"))
		for _, r := range report.Parse(b) {
			if r.Kind != report.Hang {
				return false, false
			}
		}
		return true, false
	}
	// report.Contains is only Parse's prefilter: the guest OOM killer's
	// dump ("Free swap  = 0kB") matches it, and an executor the OOM
	// killer took would be blamed on the kernel without a replay.
	if b, err := os.ReadFile(filepath.Join(f.Dir, "console.txt")); err == nil && len(report.Parse(b)) > 0 {
		return false, false
	}
	return trouble, hang
}

// ConfirmReplay is what the gate's own replays of a harness event on the
// kernel under test showed (each with TimeoutS, longer than the run that
// ran out of time).
type ConfirmReplay struct {
	Runs       int     `json:"runs"`
	Reproduced int     `json:"reproduced"`
	TimeoutS   float64 `json:"timeout_seconds,omitempty"`
	Note       string  `json:"note,omitempty"`
	// As is the other hang a hang came back as (campaign.CameBack),
	// the first one seen; empty when it came back as itself.
	As string `json:"reproduced_as,omitempty"`
}

// asNote says what a hang came back as when that was another hang.
func (c *ConfirmReplay) asNote() string {
	if c.As == "" {
		return ""
	}
	return " (as " + c.As + ")"
}

// troubleLog is what the gate's target wrapper saw of harness trouble:
// how many runs, and the longest such run per signature (a replay needs
// at least as long, and gets twice as long).
type troubleLog struct {
	mu   sync.Mutex
	runs int
	dur  map[string]time.Duration
	max  time.Duration
}

func (l *troubleLog) add(sig string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dur == nil {
		l.dur = map[string]time.Duration{}
	}
	l.runs++
	l.dur[sig] = max(l.dur[sig], d)
	l.max = max(l.max, d)
}

func (l *troubleLog) seen() (int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs, l.max
}

func (l *troubleLog) longest(sig string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.dur[sig]; ok {
		return d
	}
	return l.max
}

// confirmTimeoutScale: a replay that decides a hang gets this many times
// the time of the run that hung.
const confirmTimeoutScale = 2

// confirmRuns is how many replays a harness event gets in the confirm
// phase (stopping at the first that shows it again).
const confirmRuns = 2

// confirmNeed is the time to keep, once harness trouble was seen, for
// the replays that decide it: a replay at confirmTimeoutScale times the
// longest trouble run, and a VM restart.
func (g *gate) confirmNeed() time.Duration {
	n, d := g.tut.trouble.seen()
	if n == 0 {
		return 0
	}
	return confirmTimeoutScale*d + g.restartTime() + confirmSlack
}

// confirmSlack is kept beyond a replay's own time: collecting the
// findings, the last program of the campaign ending.
const confirmSlack = 3 * time.Second

// restartTime is how long bringing the target up again took (the boot
// phase), at least a second.
func (g *gate) restartTime() time.Duration {
	return max(g.res.phaseDuration("boot"), time.Second)
}

// confirmTimeout is the timeout of a replay deciding sig: twice the
// longest run that showed it, at least twice Config.ProgramTimeout and a
// minute (the phase's end may cut it: never below the run it decides).
func (g *gate) confirmTimeout(sig string) time.Duration {
	return max(confirmTimeoutScale*g.tut.trouble.longest(sig), confirmTimeoutScale*g.cfg.ProgramTimeout, time.Minute)
}

// confirm replays every harness event the kernel under test has not been
// replayed on yet (a hang: not with a longer timeout), until the phase's
// stop: one that comes back is the kernel's (status new), one that does
// not is a harness flake, one that could not be replayed stays
// unconfirmed (the gate errs, exit 2).
func (g *gate) confirm(ph *Phase) {
	var todo []*FindingRecord
	for i := range g.res.Findings {
		f := &g.res.Findings[i]
		trouble, hang := isTrouble(f)
		if !trouble || f.reproProg == nil {
			continue
		}
		if k, _ := g.cfg.Known.Match(f.Signature, g.res.Kernel.Release, g.res.Kernel.Target, g.now()); k != nil {
			continue
		}
		if f.Confirm != nil && f.Confirm.Runs > 0 {
			continue
		}
		if !hang && f.Replays > 0 {
			continue // the campaign's replays decided it
		}
		todo = append(todo, f)
	}
	if len(todo) == 0 {
		ph.Note = "no harness event to replay"
		return
	}
	stop := g.hard
	if g.cfg.OpenBaseline != nil {
		stop = stop.Add(-g.baselineKeep())
	}
	g.tut.setStop(stop)
	var notes []string
	for _, f := range todo {
		c := &ConfirmReplay{}
		f.Confirm = c
		to := g.confirmTimeout(f.Signature)
		for k := 0; k < 2*confirmRuns && c.Runs < confirmRuns && c.Reproduced == 0 && g.ctx.Err() == nil; k++ {
			left := time.Until(stop)
			// A replay cut shorter than the run that showed the event
			// decides nothing.
			if need := g.tut.trouble.longest(f.Signature); left < need+time.Second {
				c.Note = fmt.Sprintf("budget spent: %v left, the event's run took %v", left.Round(time.Second), need.Round(time.Second))
				break
			}
			run := min(to, left-time.Second)
			c.TimeoutS = run.Seconds()
			opt := f.RunMode.options(g.cfg.Corrupt)
			opt.Timeout = run
			o, err := g.tut.Run(f.reproProg, opt)
			v, herr := judge.Judge(f.reproProg, o, err)
			if herr != nil {
				c.Note = "replay: " + herr.Error()
				continue
			}
			c.Runs++
			back, as := campaign.CameBack(f.Signature, v)
			if back {
				c.Reproduced++
				if as != f.Signature && c.As == "" {
					c.As = as
				}
			}
			for _, s := range v.Signatures() {
				f.addShowed(s)
			}
		}
		notes = append(notes, fmt.Sprintf("%s: %d/%d%s with a timeout of %v%s", f.Signature, c.Reproduced, c.Runs, c.asNote(),
			time.Duration(c.TimeoutS*float64(time.Second)).Round(time.Second), strings.TrimSuffix("; "+c.Note, "; ")))
	}
	ph.Note = strings.Join(notes, "\n")
}

// baselineKeep is what the confirm phase leaves for the baseline phase.
func (g *gate) baselineKeep() time.Duration {
	return time.Until(g.hard) / 4
}

// troubleStatus decides a harness event f (isTrouble): new (it came back:
// the kernel's), harness-flake (replayed, never came back) or
// unconfirmed (never replayed: the gate cannot say). A hang is decided
// by the confirm replays only (with a longer timeout); the campaign's
// replays, with the timeout it ran out of, cannot tell a slow program
// from a hung one.
func troubleStatus(f *FindingRecord, hang bool) (status, reason string) {
	runs, shown := f.Replays, f.Reproduced
	if hang {
		runs, shown = 0, 0
	}
	if c := f.Confirm; c != nil {
		runs += c.Runs
		shown += c.Reproduced
	}
	what, clean := "the executor or VM died", "the console showed no kernel report"
	switch {
	case hang:
		what = "the executor or VM ran out of time"
	case kernelStall(f.Signature):
		what, clean = "the kernel reported a stall", "the console showed no other report (a TCG guest whose vCPUs the loaded host starved reports stalls too)"
	}
	switch {
	case shown > 0:
		as := ""
		if f.Confirm != nil {
			as = f.Confirm.asNote()
		}
		return StatusNew, fmt.Sprintf("%s again on %d of %d replays%s%s", what, shown, runs, as, confirmWith(f))
	case runs > 0 && len(f.ReplayShowed) > 0:
		return StatusNew, fmt.Sprintf("%s, not again on %d replay(s)%s, but the replays showed %s on the kernel under test",
			what, runs, confirmWith(f), strings.Join(f.ReplayShowed, ", "))
	case runs > 0:
		return StatusHarnessFlake, fmt.Sprintf("%s, but not again on %d replay(s)%s, and %s: "+
			"an unreproduced harness error, not counted against the kernel (files: %s)", what, runs, confirmWith(f), clean, f.Dir)
	}
	why := "budget spent"
	if c := f.Confirm; c != nil && c.Note != "" {
		why = c.Note
	}
	return StatusUnconfirmed, fmt.Sprintf("%s and was never replayed (%s): harness trouble the gate cannot blame on the kernel nor clear (files: %s)", what, why, f.Dir)
}

func confirmWith(f *FindingRecord) string {
	if c := f.Confirm; c != nil && c.Runs > 0 {
		return fmt.Sprintf(" (with a timeout of %v)", time.Duration(c.TimeoutS*float64(time.Second)).Round(time.Second))
	}
	return ""
}
