package campaign

import (
	"fmt"
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
	// Guest sums the guest's phases (obs.Observation.Phases) by name.
	Guest map[string]float64 `json:"guest,omitempty"`
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
	if s.t.Guest != nil {
		t.Guest = make(map[string]float64, len(s.t.Guest))
		for k, v := range s.t.Guest {
			t.Guest[k] = v
		}
	}
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
	return s
}
