package campaign

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// StatsFile is the JSON-lines file in the workdir that Run appends a
// Sample to every StatsEvery (and at its end), for the campaign page.
const StatsFile = "stats.jsonl"

// StatsEvery is how often Run writes a sample.
var StatsEvery = 5 * time.Second

// Sample is one line of StatsFile: the counts of one run of a campaign so
// far. A workdir used by several runs (resumed) holds the samples of each,
// told apart by Run.
type Sample struct {
	Time          time.Time `json:"time"`
	Run           string    `json:"run"` // the run's start time, RFC 3339
	Target        string    `json:"target"`
	Kernel        string    `json:"kernel,omitempty"` // uname -r of the last observation, if it said
	Seed          uint64    `json:"seed"`
	Elapsed       float64   `json:"elapsed_s"`
	Programs      int64     `json:"programs"`
	Forks         int64     `json:"forks"`
	Events        int64     `json:"failing_runs"`
	Findings      int64     `json:"findings"`
	HarnessErrors int64     `json:"harness_errors"`
	// Edges and ForkMMPCs are the kernel coverage so far (KCOV: distinct
	// edges, and PCs in kernel/fork.c and mm/); absent when the campaign
	// collects none.
	Edges     int `json:"cover_edges,omitempty"`
	ForkMMPCs int `json:"cover_forkmm_pcs,omitempty"`
	// Signatures counts, per signature, the failing runs of this run that
	// showed it, with the first and last time.
	Signatures map[string]*SigCount `json:"signatures,omitempty"`
}

// SigCount is how often and when one signature showed up.
type SigCount struct {
	Count int64     `json:"count"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// statsLog collects what samples need beyond Stats.
type statsLog struct {
	mu       sync.Mutex
	path     string
	sample   Sample
	onSample func(Sample)
	// cover returns the coverage so far (nil: none); safe to call from
	// the sampling goroutine.
	cover func() *cover.Counts
}

func newStatsLog(cfg Config, start time.Time) *statsLog {
	if cfg.Workdir == "" {
		return nil
	}
	return &statsLog{path: filepath.Join(cfg.Workdir, StatsFile), onSample: cfg.OnSample, sample: Sample{
		Run: start.UTC().Format(time.RFC3339Nano), Target: cfg.Target.Name(), Seed: cfg.Seed,
		Signatures: map[string]*SigCount{}}}
}

// saw notes a judged run (nil-safe; with the campaign's lock held).
func (l *statsLog) saw(o *obs.Observation, v *judge.Verdict) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !v.OK() {
		l.sample.Events++
	}
	if o != nil && o.Kernel != "" {
		l.sample.Kernel = o.Kernel
	}
	now := time.Now().UTC()
	for _, sig := range v.Signatures() {
		c := l.sample.Signatures[sig]
		if c == nil {
			c = &SigCount{First: now}
			l.sample.Signatures[sig] = c
		}
		c.Count++
		c.Last = now
	}
}

// harnessError notes a harness error (nil-safe).
func (l *statsLog) harnessError() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.sample.HarnessErrors++
	l.mu.Unlock()
}

// start writes a sample every StatsEvery until the returned function is
// called, which writes the last one.
func (l *statsLog) start(st *Stats, programs, forks *atomic.Int64, start time.Time) func() {
	if l == nil {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(StatsEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				l.write(st, programs.Load(), forks.Load(), start)
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		l.write(st, programs.Load(), forks.Load(), start)
	}
}

// write appends a sample (nil-safe; errors are ignored: stats are a view).
func (l *statsLog) write(st *Stats, programs, forks int64, start time.Time) {
	l.mu.Lock()
	s := l.sample
	s.Time = time.Now().UTC()
	s.Elapsed = time.Since(start).Seconds()
	s.Programs, s.Forks = programs, forks
	s.Findings = atomic.LoadInt64(&st.Findings)
	if l.cover != nil {
		if c := l.cover(); c != nil {
			s.Edges, s.ForkMMPCs = c.Edges, c.ForkMMPCs
		}
	}
	sigs := make(map[string]*SigCount, len(s.Signatures))
	for k, v := range s.Signatures {
		c := *v
		sigs[k] = &c
	}
	s.Signatures = sigs
	b, err := json.Marshal(s)
	l.mu.Unlock()
	if l.onSample != nil {
		l.onSample(s)
	}
	if err != nil {
		return
	}
	fd, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fd.Write(append(b, '\n'))
	fd.Close()
}

// ReadSamples reads a workdir's StatsFile (missing: none); lines that do
// not decode are skipped (a line cut by a kill).
func ReadSamples(workdir string) ([]Sample, error) {
	b, err := os.ReadFile(filepath.Join(workdir, StatsFile))
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []Sample
	start := 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == '\n' {
			if i > start {
				var s Sample
				if json.Unmarshal(b[start:i], &s) == nil {
					out = append(out, s)
				}
			}
			start = i + 1
		}
	}
	return out, nil
}
