package campaign

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"
)

// TimeSpent is where a campaign's time went, in seconds summed over its
// programs (several machines run at once: the sum can exceed the
// campaign's wall time). Run is the target's whole run of a program
// (dispatch, the guest, the result's transfer); Guest, when the target
// reports it, splits the guest's part by phase.
type TimeSpent struct {
	Generate float64 `json:"generate"` // drawing or mutating the program
	Run      float64 `json:"run"`      // the target's run
	Judge    float64 `json:"judge"`    // the checker's verdict
	Record   float64 `json:"record"`   // taking in the result: pool, corpus, coverage
	Save     float64 `json:"save"`     // writing finding directories
	Minimize float64 `json:"minimize"` // minimizing and replaying findings
	Programs int64   `json:"programs"`
	// WordReruns counts programs run again with every view's words
	// because their digests-first run's verdict needed them (runJudged);
	// their time is in Run and Judge.
	WordReruns int64 `json:"word_reruns,omitempty"`
	// Guest sums the guest's phases (obs.Observation.Phases) by name.
	Guest map[string]float64 `json:"guest,omitempty"`
	// Unanswered sums the run time of programs whose run returned no
	// observation (a kernel report that ended it, a hang, an executor
	// crash, a VM that went down), UnansweredRuns counts them: their
	// time is in Run and in no guest phase.
	Unanswered     float64 `json:"run_unanswered,omitempty"`
	UnansweredRuns int64   `json:"runs_unanswered,omitempty"`
	// Work sums what the program's processes did inside the guest's
	// "program" phase (obs.Observation.Work): each operation kind, views,
	// census, evidence, KCOV drains; summed over processes.
	Work map[string]float64 `json:"work,omitempty"`
}

// spent accumulates a TimeSpent across a campaign's workers.
type spent struct {
	mu sync.Mutex
	t  TimeSpent
}

func (s *spent) add(f func(t *TimeSpent)) {
	s.mu.Lock()
	f(&s.t)
	s.mu.Unlock()
}

func (s *spent) snapshot() *TimeSpent {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.t
	t.Guest, t.Work = maps.Clone(s.t.Guest), maps.Clone(s.t.Work)
	return &t
}

func secs(d time.Duration) float64 { return d.Seconds() }

// String says it in a line: each host phase's share of the total, the
// mean run per program, and the guest's phases' shares of the run.
func (t *TimeSpent) String() string {
	if t == nil || t.Programs == 0 {
		return ""
	}
	total := t.Generate + t.Run + t.Judge + t.Record + t.Save + t.Minimize
	if total <= 0 {
		return ""
	}
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x/total) }
	s := fmt.Sprintf("run %s (%.2f s/program), generate %s, judge %s, record %s, save %s, minimize %s",
		pct(t.Run), t.Run/float64(t.Programs), pct(t.Generate), pct(t.Judge), pct(t.Record), pct(t.Save), pct(t.Minimize))
	if t.WordReruns > 0 {
		s += fmt.Sprintf(" (%d programs ran again with every view's word)", t.WordReruns)
	}
	if len(t.Guest) > 0 && t.Run > 0 {
		var ks []string
		for k := range t.Guest {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool { return t.Guest[ks[i]] > t.Guest[ks[j]] })
		var parts []string
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", k, 100*t.Guest[k]/t.Run))
		}
		s += "; of the run: " + strings.Join(parts, ", ")
	}
	if t.UnansweredRuns > 0 && t.Run > 0 {
		s += fmt.Sprintf("; runs without a result (kernel reports, hangs, crashes): %d, %.1f%% of the run", t.UnansweredRuns, 100*t.Unanswered/t.Run)
	}
	if w := topShares(t.Work, 5); w != "" {
		s += "; in the program (summed over its processes): " + w
	}
	return s
}

// topShares lists the n largest entries of m as shares of their sum.
func topShares(m map[string]float64, n int) string {
	var sum float64
	var ks []string
	for k, v := range m {
		sum += v
		ks = append(ks, k)
	}
	if sum <= 0 {
		return ""
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	var parts []string
	for _, k := range ks[:min(n, len(ks))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*m[k]/sum))
	}
	return strings.Join(parts, ", ")
}
