package campaign

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
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
	Time   time.Time `json:"time"`
	Run    string    `json:"run"` // the run's start time, RFC 3339
	Target string    `json:"target"`
	// ForkImpl is the --fork-impl profile the campaign's forks used ("":
	// the kernel's own fork).
	ForkImpl      string  `json:"fork_impl,omitempty"`
	Kernel        string  `json:"kernel,omitempty"` // uname -r of the last observation, if it said
	Seed          uint64  `json:"seed"`
	Elapsed       float64 `json:"elapsed_s"`
	Programs      int64   `json:"programs"`
	Forks         int64   `json:"forks"`
	Events        int64   `json:"failing_runs"`
	Findings      int64   `json:"findings"`
	HarnessErrors int64   `json:"harness_errors"`
	// Edges and ForkMMPCs are the kernel coverage so far (KCOV: distinct
	// edges, and PCs in kernel/fork.c and mm/); absent when the campaign
	// collects none.
	Edges     int `json:"cover_edges,omitempty"`
	ForkMMPCs int `json:"cover_forkmm_pcs,omitempty"`
	// CoverEvery is how many programs share one that collects coverage
	// (Config.CoverEach) when more than one: the coverage is a sample's.
	CoverEvery int `json:"cover_every,omitempty"`
	// CoverRule says which programs those are (Config.CoverRule), when
	// CoverEvery is set.
	CoverRule string `json:"cover_rule,omitempty"`
	// Signatures counts, per signature, the failing runs of this run that
	// showed it, with the first and last time.
	Signatures map[string]*SigCount `json:"signatures,omitempty"`
	// Spent is where the run's time went so far, by phase.
	Spent *TimeSpent `json:"time_spent,omitempty"`
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
	log   io.Writer
	// Written by the sampling goroutine (and the last write after it).
	writes, failed int
	firstErr       error
}

func newStatsLog(cfg Config, start time.Time) *statsLog {
	if cfg.Workdir == "" {
		return nil
	}
	l := &statsLog{path: filepath.Join(cfg.Workdir, StatsFile), onSample: cfg.OnSample, log: cfg.Log, sample: Sample{
		Run: start.UTC().Format(time.RFC3339Nano), Target: cfg.Target.Name(), ForkImpl: agents.ForkImplOf(cfg.Target), Seed: cfg.Seed,
		Signatures: map[string]*SigCount{}}}
	if n := cfg.CoverEach(); n > 1 {
		l.sample.CoverEvery, l.sample.CoverRule = n, cfg.CoverRule()
	}
	return l
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
		if l.failed > 0 {
			st.StatsErrors = l.failed
			st.StatsError = fmt.Sprintf("%d of %d samples not written to %s: %v", l.failed, l.writes, l.path, l.firstErr)
			logf(l.log, "stats: %s (the campaign page lacks them)", st.StatsError)
		}
	}
}

// write appends a sample. A failure is counted, logged once and said at
// the end (Stats.StatsError): the campaign goes on without its page.
func (l *statsLog) write(st *Stats, programs, forks int64, start time.Time) {
	l.mu.Lock()
	s := l.sample
	s.Time = time.Now().UTC()
	s.Elapsed = time.Since(start).Seconds()
	s.Programs, s.Forks = programs, forks
	s.Findings = atomic.LoadInt64(&st.Findings)
	if sp := st.spent.snapshot(); sp.Programs > 0 {
		s.Spent = sp
	}
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
	l.writes++
	if err == nil {
		err = appendLine(l.path, b)
	}
	if err != nil {
		l.failed++
		if l.firstErr == nil {
			l.firstErr = err
			logf(l.log, "stats: writing a sample to %s failed (the campaign goes on; its page will lack the samples not written): %v", l.path, err)
		}
	}
}

// AppendSample appends s to workdir's StatsFile as write does (the live
// page of a distributed campaign keeps its samples there too).
func AppendSample(workdir string, s Sample) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return appendLine(filepath.Join(workdir, StatsFile), b)
}

// appendLine appends line and a newline to the file at path, creating
// it; when the file does not end with a newline (a write cut short by a
// kill or a full disk), it writes one first, so the new line is not
// glued to the torn one.
func appendLine(path string, line []byte) error {
	fd, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(line)+2)
	if fi, err := fd.Stat(); err != nil {
		fd.Close()
		return err
	} else if !fi.Mode().IsRegular() {
		fd.Close()
		return &fsutil.NotRegularError{Path: path, Mode: fi.Mode()}
	} else if fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := fd.ReadAt(last, fi.Size()-1); err != nil {
			fd.Close()
			return err
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
		}
	}
	buf = append(append(buf, line...), '\n')
	if _, err := fd.Write(buf); err != nil {
		fd.Close()
		return err
	}
	return fd.Close()
}

// maxSampleLine bounds one line of StatsFile; a longer one is malformed.
const maxSampleLine = 16 << 20

// StatsRead is what ReadStats found in a workdir's StatsFile.
type StatsRead struct {
	Path    string
	Samples []Sample
	// Malformed counts the lines (or pieces of a line) that held no
	// sample: cut by a kill, glued to a sample by an older forkfuzz that
	// appended to a torn line, or not forkfuzz's. FirstMalformed is the
	// line number of the first.
	Malformed, FirstMalformed int
}

// Note says what was skipped ("" when nothing was).
func (r *StatsRead) Note() string {
	if r == nil || r.Malformed == 0 {
		return ""
	}
	return fmt.Sprintf("%s: skipped %d malformed line(s) (the first at line %d): a write cut short, or not a forkfuzz stats file", r.Path, r.Malformed, r.FirstMalformed)
}

// ReadStats reads a workdir's StatsFile line by line (missing: no
// samples). A line that holds no sample is skipped and counted; a sample
// glued after garbage on one line is still read. Not a regular file is
// an error.
func ReadStats(workdir string) (*StatsRead, error) {
	r := &StatsRead{Path: filepath.Join(workdir, StatsFile)}
	f, err := fsutil.OpenRegular(r.Path, math.MaxInt64)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	bad := func(n int) {
		if r.Malformed == 0 {
			r.FirstMalformed = n
		}
		r.Malformed++
	}
	for n := 1; ; n++ {
		line, long, err := readLine(br, maxSampleLine)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading %s: %w", r.Path, err)
		}
		if long {
			bad(n)
		} else if len(bytes.TrimSpace(line)) > 0 {
			s, ok, glued := decodeSample(line)
			if !ok || glued {
				bad(n)
			}
			if ok {
				r.Samples = append(r.Samples, s)
			}
		}
		if err == io.EOF {
			return r, nil
		}
	}
}

// readLine returns the next line without its newline; a line longer than
// max is consumed and returned empty with long set. err is io.EOF at the
// end (with the last line, if it has no newline).
func readLine(br *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(frag) > max+1 {
				long, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), long, err
	}
}

// sampleStart is how every marshalled Sample begins.
var sampleStart = []byte(`{"time":`)

// decodeSample decodes a line; when it does not decode, the sample after
// the last sampleStart in it (glued after a torn line) is tried.
func decodeSample(line []byte) (s Sample, ok, glued bool) {
	if json.Unmarshal(line, &s) == nil {
		return s, true, false
	}
	if i := bytes.LastIndex(line, sampleStart); i > 0 {
		s = Sample{}
		if json.Unmarshal(line[i:], &s) == nil {
			return s, true, true
		}
	}
	return Sample{}, false, false
}

// ReadSamples reads a workdir's StatsFile (missing: none); lines that do
// not decode are skipped (ReadStats counts them).
func ReadSamples(workdir string) ([]Sample, error) {
	r, err := ReadStats(workdir)
	if err != nil {
		return nil, err
	}
	return r.Samples, nil
}
