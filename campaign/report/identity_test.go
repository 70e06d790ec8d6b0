package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// A finding's pages say the replay command and kernel that report.txt
// says, also when drawn again from the directory (forkfuzz report): an
// Async-fork finding's report.html once said `forkfuzz exec --target qemu
// --kernel BZIMAGE minimized.ffz` (no --fork-impl: it replays on stock
// fork and passes) and "kernel unknown".
func TestFindingIdentityKept(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--target", "qemu", "--kernel", "/k/bzImage-6.1.192-asyncfork", "--fork-impl", "async-fork"}
	kid := campaign.KernelID{Image: "/k/bzImage-6.1.192-asyncfork", SHA256: "ab12cd34", Uname: "6.1.192 #1 SMP"}
	f := &campaign.Finding{Issue: judge.Issue{Oracle: checker.OracleSnapshot, Signature: "snapshot:lost-store:anon-private", Explanation: "x"},
		Program: p, Minimized: p, Target: "qemu", TargetArgs: args, Kernel: kid, CampaignSeed: 3, Index: 17}
	wd := t.TempDir()
	dir := storeFinding(t, wd, f)
	want := "forkfuzz exec --target qemu --kernel /k/bzImage-6.1.192-asyncfork --fork-impl async-fork minimized.ffz"
	check := func(when string) {
		t.Helper()
		rep := read(t, filepath.Join(dir, "report.txt"))
		var m Meta
		if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, FindingJSON))), &m); err != nil {
			t.Fatal(err)
		}
		page := read(t, filepath.Join(dir, FindingHTML))
		if !strings.Contains(rep, "replay:   "+want) || m.Replay != want || !strings.Contains(page, want) {
			t.Errorf("%s: replay lines differ: report.json %q, want %q in report.txt and report.html too", when, m.Replay, want)
		}
		if !strings.Contains(m.Kernel, "sha256 ab12cd34") || !strings.Contains(page, "sha256 ab12cd34") || strings.Contains(page, "kernel unknown") {
			t.Errorf("%s: kernel %q", when, m.Kernel)
		}
	}
	check("saved")
	if n, warns, err := WriteFindingPages(wd); err != nil || n != 1 || len(warns) > 0 {
		t.Fatalf("WriteFindingPages: %d, %v, %v", n, warns, err)
	}
	check("drawn again")
	// A directory saved before report.json kept them: the replay line
	// of report.txt gives the flags.
	os.WriteFile(filepath.Join(dir, FindingJSON), []byte(`{"signature":"snapshot:lost-store:anon-private"}`), 0o644)
	g, err := LoadFinding(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ReplayCommand(g); got != want {
		t.Errorf("from report.txt: %q, want %q", got, want)
	}
}

// A finding whose run collected no kernel coverage and took no page
// census keeps saying so when read back from its directory (the seed
// file), and every replay command drawn from it runs the same way: with
// and without the target's flags.
func TestFindingNoCoverKept(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--target", "qemu", "--kernel", "/k/bzImage"}, nil} {
		f := &campaign.Finding{Issue: judge.Issue{Oracle: checker.OracleSnapshot, Signature: "snapshot:lost-store:anon-private", Explanation: "x"},
			Program: p, Minimized: p, Target: "qemu", TargetArgs: args, CampaignSeed: 3, Index: 17, NoCover: true, NoCensus: true}
		dir := storeFinding(t, t.TempDir(), f)
		var m Meta
		if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, FindingJSON))), &m); err != nil {
			t.Fatal(err)
		}
		if !m.NoCover || !strings.Contains(m.Replay, "--no-cover") || !m.NoCensus || !strings.Contains(m.Replay, "--no-census") {
			t.Errorf("args %q: report.json no_cover %v, no_census %v, replay %q", args, m.NoCover, m.NoCensus, m.Replay)
		}
		g, err := LoadFinding(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !g.NoCover || !g.NoCensus || g.Index != 17 || g.CampaignSeed != 3 {
			t.Errorf("args %q: read back NoCover %v, NoCensus %v, index %d, seed %d", args, g.NoCover, g.NoCensus, g.Index, g.CampaignSeed)
		}
		if got := ReplayCommand(g); !strings.Contains(got, " --no-cover ") || !strings.Contains(got, " --no-census ") {
			t.Errorf("args %q: replay command read back %q, want --no-cover and --no-census before the program", args, got)
		}
	}
}

// The campaign page names the fork implementation a campaign forced.
func TestForkMode(t *testing.T) {
	for _, c := range []struct{ target, impl, want string }{
		{"qemu", "", "the guest kernel's fork"},
		{"qemu", "async-fork", "async-fork (--fork-impl, checked per fork) on the qemu target"},
		{"sim-async+x", "", "simulated async fork with mutant x"},
	} {
		if got := forkMode(c.target, c.impl); got != c.want {
			t.Errorf("forkMode(%q, %q) = %q, want %q", c.target, c.impl, got, c.want)
		}
	}
}

// The campaign page draws where the time went, host and guest.
func TestCampaignPageTime(t *testing.T) {
	s := campaign.Sample{Target: "qemu", Programs: 10, Elapsed: 20, Spent: &campaign.TimeSpent{Programs: 10, Run: 18, Generate: 0.5, Judge: 1, Record: 0.5,
		Guest: map[string]float64{"ops": 9, "kcov": 6}, Work: map[string]float64{"fork": 6, "wait": 3, "view": 1}}}
	page := string(CampaignPage(&Campaign{Samples: []campaign.Sample{s}}))
	for _, want := range []string{`<section id="time">`, "1.80 s per program", "run 90.0% (18.0 s)", "kcov 33.3% (6.0 s)", "dispatch, transfer, other 16.7% (3.0 s)",
		"inside the program, summed over its processes", "fork 60.0% (6.0 s)", "view 10.0% (1.0 s)"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Runs without a result (a kernel report, a hang) are shown apart
	// from dispatch and transfer.
	s.Spent.Unanswered, s.Spent.UnansweredRuns = 2, 1
	page = string(CampaignPage(&Campaign{Samples: []campaign.Sample{s}}))
	for _, want := range []string{"runs without a result (1) 11.1% (2.0 s)", "dispatch, transfer, other 5.6% (1.0 s)"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// What every replay run showed and how long it took is in report.txt,
// report.json and report.html, and stays there when the pages are drawn
// again from the directory.
func TestFindingReplayRunsKept(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := &campaign.Finding{Issue: judge.Issue{Oracle: "executor-hang", Signature: "executor-hang", Explanation: "x"},
		Program: p, Minimized: p, Target: "qemu", CampaignSeed: 3, Index: 17, Replays: 3, Reproduced: 2,
		ReplayRuns: []campaign.ReplayRun{{Outcome: "reproduced", Took: 125 * time.Second}, {Outcome: "passed", Took: 3 * time.Second}, {Outcome: "reproduced", Took: 124 * time.Second}}}
	want := "2 reproduced (2m5s, 2m4s); 1 passed (3s); a hang's replays stop once 2 came back"
	wd := t.TempDir()
	dir := storeFinding(t, wd, f)
	check := func(when string) {
		t.Helper()
		var m Meta
		if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, FindingJSON))), &m); err != nil {
			t.Fatal(err)
		}
		if len(m.ReplayRuns) != 3 || m.ReplayRuns[1] != (ReplayRun{Outcome: "passed", Seconds: 3}) {
			t.Errorf("%s: report.json replay_runs %+v", when, m.ReplayRuns)
		}
		if rep := read(t, filepath.Join(dir, "report.txt")); !strings.Contains(rep, "replays:  "+want) {
			t.Errorf("%s: report.txt lacks %q:\n%s", when, want, rep)
		}
		// (The page escapes the apostrophe.)
		if page := read(t, filepath.Join(dir, FindingHTML)); !strings.Contains(page, "2 reproduced (2m5s, 2m4s); 1 passed (3s); a hang&#39;s replays stop") {
			t.Errorf("%s: report.html lacks %q", when, want)
		}
	}
	check("saved")
	if n, warns, err := WriteFindingPages(wd); err != nil || n != 1 || len(warns) > 0 {
		t.Fatalf("WriteFindingPages: %d, %v, %v", n, warns, err)
	}
	check("drawn again")
}
