package campaign

import (
	"fmt"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/checker/judge"
)

// ReplayRun is one run of a finding's replays.
type ReplayRun struct {
	// Outcome is "reproduced" ("reproduced as SIG" for a hang that came
	// back as another hang: CameBack), "passed", the first other
	// signature the run failed with, or "no verdict: " and the harness
	// error.
	Outcome string
	Took    time.Duration
}

// NewReplayRun names what one replay run of a finding with signature sig
// showed (v and herr as judge.Judge gave them).
func NewReplayRun(sig string, v *judge.Verdict, herr error, took time.Duration) ReplayRun {
	r := ReplayRun{Took: took}
	back, as := CameBack(sig, v)
	switch {
	case herr != nil:
		r.Outcome = "no verdict: " + firstLine(herr.Error(), 120)
	case back && as == sig:
		r.Outcome = "reproduced"
	case back:
		r.Outcome = "reproduced as " + as
	case len(v.Issues) > 0:
		r.Outcome = v.Issues[0].Signature
	default:
		r.Outcome = "passed"
	}
	return r
}

// hangReplaysEnough is how many replays of a hang that come back end its
// replays: each costs the longer replay timeout (hangReplayTimeout) and,
// on a VM, a restart, and two are what the gate calls reproducible.
const hangReplaysEnough = 2

// replaysEnough is how many reproductions end f's replays.
func replaysEnough(f *Finding) int {
	if hangReplayTimeout(f) > 0 {
		return hangReplaysEnough
	}
	return replays
}

// Showed is the signature a replay run's outcome names when the run
// failed with another one than the finding's, "" otherwise.
func (r ReplayRun) Showed() string {
	return OutcomeShowed(r.Outcome)
}

// OutcomeShowed is ReplayRun.Showed of an outcome as report.json keeps it.
func OutcomeShowed(outcome string) string {
	if outcome == "passed" || outcome == "reproduced" || strings.HasPrefix(outcome, "reproduced as ") || strings.HasPrefix(outcome, "no verdict: ") {
		return ""
	}
	return outcome
}

// ReplayRunsNote says what f's replay runs showed and what they cost,
// grouped by outcome in order of first appearance: "2 reproduced (4m1s,
// 4m2s); 1 passed (3m50s)", and why the replays stopped early when a
// hang came back hangReplaysEnough times.
func (f *Finding) ReplayRunsNote() string {
	if len(f.ReplayRuns) == 0 {
		return ""
	}
	var order []string
	took := map[string][]string{}
	for _, r := range f.ReplayRuns {
		if _, ok := took[r.Outcome]; !ok {
			order = append(order, r.Outcome)
		}
		took[r.Outcome] = append(took[r.Outcome], r.Took.Round(100*time.Millisecond).String())
	}
	parts := make([]string, len(order))
	for i, o := range order {
		parts[i] = fmt.Sprintf("%d %s (%s)", len(took[o]), o, strings.Join(took[o], ", "))
	}
	note := strings.Join(parts, "; ")
	if to := hangReplayTimeout(f); to > 0 && f.Reproduced >= hangReplaysEnough && f.Replays < replays {
		each := "twice the hung run's time"
		if f.RunTime > 0 { // not kept in a finding's directory
			each = "the replay timeout, " + to.Round(time.Second).String()
		}
		note += fmt.Sprintf("; a hang's replays stop once %d came back (each may take %s, and a VM restart)", hangReplaysEnough, each)
	}
	return note
}

// firstLine is s's first line, cut to at most n bytes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
