package report

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// saveFinding saves a finding with signature sig into workdir as a
// campaign does and returns its directory.
func saveFinding(t *testing.T, workdir, sig string) string {
	t.Helper()
	p := campaign.NewProgram(3, 1, nil, gen.DefaultWeights())
	return storeFinding(t, workdir, &campaign.Finding{Issue: judge.Issue{Signature: sig, Oracle: "executor-crash"}, Program: p, Target: "sim"})
}

// storeFinding saves f with its pages into workdir as a campaign does
// and returns its directory.
func storeFinding(t *testing.T, workdir string, f *campaign.Finding) string {
	t.Helper()
	s := &campaign.FindingStore{Dir: workdir, Pages: Files}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Save(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func statsLine(t *testing.T, programs int64) string {
	t.Helper()
	b, err := json.Marshal(campaign.Sample{Time: time.Now().UTC(), Run: "r", Target: "sim", Programs: programs, Elapsed: float64(programs)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// WriteCampaign on workdirs good and bad: a bad finding directory is left
// out with a warning and the page is still written; a directory that is no
// workdir is an error naming it.
func TestWriteCampaignWorkdirs(t *testing.T) {
	for _, c := range []struct {
		name     string
		setup    func(t *testing.T, wd string) string // returns the dir to report on
		err      string                               // "" : the page is written
		warns    []string
		rows     int
		notWork  bool
		onPage   []string
		notOnPag []string
	}{
		{name: "missing", setup: func(t *testing.T, wd string) string { return filepath.Join(wd, "nope") },
			err: "nope: not a workdir (no such directory)"},
		{name: "empty directory", setup: func(t *testing.T, wd string) string { return wd },
			err: "not a forkfuzz workdir (no stats.jsonl, no findings/)", notWork: true},
		{name: "mistyped: a directory of other files", setup: func(t *testing.T, wd string) string {
			os.WriteFile(filepath.Join(wd, "notes.txt"), []byte("x"), 0o644)
			return wd
		}, err: "not a forkfuzz workdir", notWork: true},
		{name: "a file", setup: func(t *testing.T, wd string) string {
			p := filepath.Join(wd, "f")
			os.WriteFile(p, nil, 0o644)
			return p
		}, err: "f: not a workdir (a regular file, want a directory)"},
		{name: "only stats", setup: func(t *testing.T, wd string) string {
			os.WriteFile(filepath.Join(wd, campaign.StatsFile), []byte(statsLine(t, 5)), 0o644)
			return wd
		}, onPage: []string{"1 samples from stats.jsonl"}, notOnPag: []string{"Left out"}},
		{name: "only an empty findings/", setup: func(t *testing.T, wd string) string {
			os.Mkdir(filepath.Join(wd, "findings"), 0o755)
			return wd
		}, onPage: []string{"No samples in stats.jsonl yet"}},
		{name: "good and unparsable finding", setup: func(t *testing.T, wd string) string {
			saveFinding(t, wd, "executor-crash")
			bad := saveFinding(t, wd, "executor-crash:other")
			os.WriteFile(filepath.Join(bad, "program.ffz"), []byte("fork f0 colour=red\n"), 0o644)
			return wd
		}, rows: 1, warns: []string{"executor-crash_other-", "program.ffz"}, onPage: []string{"Left out", "executor-crash_other-"}},
		{name: "a finding whose program is a FIFO", setup: func(t *testing.T, wd string) string {
			saveFinding(t, wd, "executor-crash")
			bad := saveFinding(t, wd, "executor-crash:fifo")
			os.Remove(filepath.Join(bad, "program.ffz"))
			os.Remove(filepath.Join(bad, FindingJSON))
			if err := syscall.Mkfifo(filepath.Join(bad, "program.ffz"), 0o644); err != nil {
				t.Fatal(err)
			}
			return wd
		}, rows: 1, warns: []string{"program.ffz is a FIFO, want a regular file"}},
		{name: "a finding directory holding only its signature", setup: func(t *testing.T, wd string) string {
			d := filepath.Join(wd, "findings", "x")
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, "signature"), []byte("x\n"), 0o644)
			return wd
		}, warns: []string{"findings/x skipped", "program.ffz: no such file"}},
		{name: "torn stats lines", setup: func(t *testing.T, wd string) string {
			l := statsLine(t, 5)
			os.WriteFile(filepath.Join(wd, campaign.StatsFile), []byte(l+l[:20]+"\n"+statsLine(t, 9)+"garbage"), 0o644)
			return wd
		}, warns: []string{"skipped 2 malformed line(s) (the first at line 2)"}, onPage: []string{"2 samples from stats.jsonl", "malformed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.setup(t, t.TempDir())
			done := make(chan struct{})
			var path string
			var warns []string
			var err error
			go func() {
				defer close(done)
				path, warns, err = WriteCampaign(dir)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("WriteCampaign blocked")
			}
			if c.err != "" {
				var nw *NotWorkdirError
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), dir) || errors.As(err, &nw) != c.notWork {
					t.Fatalf("err %v, want one naming %s and saying %q", err, dir, c.err)
				}
				if _, err := os.Stat(filepath.Join(dir, CampaignHTML)); err == nil {
					t.Fatal("a page was written")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != map[bool]int{true: 0, false: 1}[len(c.warns) == 0] {
				t.Fatalf("warnings %q, want one saying %q", warns, c.warns)
			}
			for _, w := range c.warns {
				if !strings.Contains(warns[0], w) {
					t.Fatalf("warning %q does not say %q", warns[0], w)
				}
			}
			page := read(t, path)
			for _, w := range c.onPage {
				if !strings.Contains(page, w) {
					t.Errorf("the page does not say %q", w)
				}
			}
			for _, w := range c.notOnPag {
				if strings.Contains(page, w) {
					t.Errorf("the page says %q", w)
				}
			}
			if rows := len(reFindingTR.FindAllString(page, -1)); rows != c.rows {
				t.Errorf("%d finding rows, want %d", rows, c.rows)
			}
		})
	}
}
