package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func sampleLine(t *testing.T, programs int64) string {
	t.Helper()
	b, err := json.Marshal(Sample{Time: time.Unix(1700000000, 0).UTC(), Run: "r", Target: "sim", Programs: programs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What ReadStats makes of a stats file, and where appendLine puts a new
// sample: never glued to a torn line.
func TestReadStats(t *testing.T) {
	s1, s2 := sampleLine(t, 1), sampleLine(t, 2)
	torn := s1[:len(s1)/2]
	for _, c := range []struct {
		name     string
		content  string // the file before (no file: "-")
		append   bool   // append a sample with 3 programs first
		programs []int64
		bad      int // malformed lines
		first    int // the first one's line number
	}{
		{name: "missing", content: "-"},
		{name: "empty", content: ""},
		{name: "two samples", content: s1 + "\n" + s2 + "\n", programs: []int64{1, 2}},
		{name: "blank lines are no samples and no errors", content: "\n" + s1 + "\n\n", programs: []int64{1}},
		{name: "torn last line", content: s1 + "\n" + torn, programs: []int64{1}, bad: 1, first: 2},
		{name: "append after a torn line starts a new line", content: s1 + "\n" + torn, append: true, programs: []int64{1, 3}, bad: 1, first: 2},
		{name: "append to a whole file", content: s1 + "\n", append: true, programs: []int64{1, 3}},
		{name: "append to no file", content: "-", append: true, programs: []int64{3}},
		{name: "glued by an older forkfuzz: the sample is kept", content: torn + s2 + "\n" + s1 + "\n", programs: []int64{2, 1}, bad: 1, first: 1},
		{name: "garbage", content: "not json\n" + s1 + "\n{\"time\": 3\n", programs: []int64{1}, bad: 2, first: 1},
		{name: "a line over the bound", content: s1 + "\n" + strings.Repeat("x", maxSampleLine+10) + "\n" + s2 + "\n", programs: []int64{1, 2}, bad: 1, first: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			wd := t.TempDir()
			path := filepath.Join(wd, StatsFile)
			if c.content != "-" {
				if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.append {
				if err := appendLine(path, []byte(sampleLine(t, 3))); err != nil {
					t.Fatal(err)
				}
			}
			r, err := ReadStats(wd)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, s := range r.Samples {
				got = append(got, s.Programs)
			}
			if !slicesEqual(got, c.programs) || r.Malformed != c.bad || r.FirstMalformed != c.first {
				t.Fatalf("samples %v, %d malformed from line %d; want %v, %d from line %d", got, r.Malformed, r.FirstMalformed, c.programs, c.bad, c.first)
			}
			if note := r.Note(); (c.bad > 0) != strings.Contains(note, "malformed") {
				t.Fatalf("note %q", note)
			}
		})
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A stats file that is a FIFO or a directory is an error, not a hang.
func TestReadStatsNotAFile(t *testing.T) {
	wd := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(wd, StatsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStats(wd); err == nil || !strings.Contains(err.Error(), "is a FIFO, want a regular file") {
		t.Fatalf("err %v", err)
	}
	wd = t.TempDir()
	os.Mkdir(filepath.Join(wd, StatsFile), 0o755)
	if _, err := ReadStats(wd); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("err %v", err)
	}
}

// A campaign whose stats cannot be written goes on, says so once in its
// log, and counts the samples lost in its Stats.
func TestStatsWriteErrorsReported(t *testing.T) {
	wd := t.TempDir()
	if err := os.Mkdir(filepath.Join(wd, StatsFile), 0o755); err != nil { // not writable as a file
		t.Fatal(err)
	}
	old := StatsEvery
	StatsEvery = 20 * time.Millisecond
	defer func() { StatsEvery = old }()
	var log bytes.Buffer
	st, err := Run(context.Background(), Config{Target: &slowModel{d: 30 * time.Millisecond}, Seed: 1, Programs: 6,
		Weights: noThreads(gen.DefaultWeights()), Workdir: wd, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if st.StatsErrors < 2 || !strings.Contains(st.StatsError, "samples not written to "+filepath.Join(wd, StatsFile)) {
		t.Fatalf("StatsErrors %d, StatsError %q", st.StatsErrors, st.StatsError)
	}
	if n := strings.Count(log.String(), "stats: writing a sample"); n != 1 {
		t.Fatalf("the failure is logged %d times, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "stats: "+st.StatsError) {
		t.Fatalf("the log lacks the end note:\n%s", log.String())
	}
}

// slowModel is modelTarget taking d a program, so samples fall between
// programs.
type slowModel struct {
	modelTarget
	d time.Duration
}

func (m *slowModel) Parallel() int { return 1 }
func (m *slowModel) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	time.Sleep(m.d)
	return m.modelTarget.Run(p, opt)
}
