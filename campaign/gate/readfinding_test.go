package gate

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A finding whose minimized program replayed 0/N keeps its original,
// and report.txt says both counts: the finding's is the last one (read
// as the first, a crash that came back 3/5 was a harness flake, exit 0).
func TestReadFindingReplayCount(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"signature":   "executor-crash\n",
		"program.ffz": "forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nfork f0\nwait f0\n",
		"report.json": `{"signature": "executor-crash", "oracle": "harness", "replay_runs": [{"outcome": "passed"}, {"outcome": "reproduced"},` +
			`{"outcome": "kernel-bug/BUG-Bad-page-state"}, {"outcome": "executor-hang"}, {"outcome": "no verdict: refused"}]}`,
		"report.txt": "signature: executor-crash\n" +
			"minimized: no: the minimized program (2 ops, in 9 target runs; minimized-dropped.ffz) reproduced 0/5 replays, so the original is kept; reproduced 3/5 replays\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := readFinding(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.Reproduced != 3 || f.Replays != 5 {
		t.Fatalf("read %d/%d replays, want the finding's 3/5", f.Reproduced, f.Replays)
	}
	// What else its replays showed, harness trouble left out.
	if !slices.Equal(f.ReplayShowed, []string{"kernel-bug/BUG-Bad-page-state"}) {
		t.Fatalf("replays showed %q, want the kernel report only", f.ReplayShowed)
	}
}
