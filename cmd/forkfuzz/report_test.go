package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/dist"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// forkfuzz report writes the campaign page of a run's workdir; a missing
// workdir is a clear error.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "run", "--target", "sim", "--fork", "async", "--mutant", "async-rollback-partial",
		"--programs", "100", "--seed", "5", "--workdir", dir, "--minimize-runs", "30", "-q")
	if code != exitFindings {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, campaign.StatsFile)); err != nil {
		t.Fatalf("run wrote no stats: %v", err)
	}
	code, out, errs = forkfuzz(t, "report", dir)
	if code != exitClean || strings.TrimSpace(out) != filepath.Join(dir, "index.html") {
		t.Fatalf("report: exit %d\n%s\n%s", code, out, errs)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	if !strings.Contains(string(b), "sim-async+async-rollback-partial") || !strings.Contains(string(b), "report.html") {
		t.Errorf("the campaign page lacks the target or finding links")
	}
	code, _, errs = forkfuzz(t, "report", filepath.Join(dir, "nope"))
	if code != exitError || !strings.Contains(errs, "nope: not a workdir") {
		t.Errorf("report of a missing workdir: exit %d, %q", code, errs)
	}
	empty := t.TempDir()
	code, _, errs = forkfuzz(t, "report", empty)
	if code != exitError || !strings.Contains(errs, empty+": not a forkfuzz workdir") {
		t.Errorf("report of an empty directory: exit %d, %q", code, errs)
	}
	// A bad finding directory is skipped with a warning; the page is
	// still written.
	bad := filepath.Join(dir, "findings", "broken")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "signature"), []byte("broken\n"), 0o644)
	os.Remove(filepath.Join(dir, "index.html"))
	code, out, errs = forkfuzz(t, "report", dir)
	if code != exitClean || !strings.Contains(errs, "warning: finding directory "+bad+" skipped") {
		t.Errorf("report with a bad finding directory: exit %d\n%s\n%s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "index.html")); err != nil || !strings.Contains(string(b), "findings/broken skipped") {
		t.Errorf("the page does not say what it left out (%v)", err)
	}
}

// A second user of a workdir gets exit 2 naming the PID that holds it.
func TestRunWorkdirInUse(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) to hold the lock from another process")
	}
	dir := t.TempDir()
	// The shell locks the file, writes its PID and becomes sleep, which
	// keeps the locked descriptor: the holder's PID is the shell's.
	holder := exec.Command("sh", "-c", `exec 9>>"$1/.lock" && flock 9 && echo $$ >"$1/.lock" && echo locked && exec sleep 60`, "sh", dir)
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	if b := make([]byte, 7); func() bool { _, err := io.ReadFull(stdout, b); return err != nil || string(b) != "locked\n" }() {
		t.Fatal("the holder did not lock the workdir")
	}
	code, out, errs := forkfuzz(t, "run", "--target", "sim", "--programs", "5", "--seed", "1", "--workdir", dir, "-q")
	want := fmt.Sprintf("workdir %s is in use by PID %d", dir, holder.Process.Pid)
	if code != exitError || !strings.Contains(errs, want) {
		t.Fatalf("run on a busy workdir: exit %d, want 2 saying %q\n%s\n%s", code, want, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "findings")); err == nil {
		t.Error("the refused run created findings/")
	}
	holder.Process.Kill()
	holder.Wait()
	if code, out, errs := forkfuzz(t, "run", "--target", "sim", "--programs", "5", "--seed", "1", "--workdir", dir, "-q"); code == exitError {
		t.Fatalf("run after the holder died (its PID still in .lock): exit %d\n%s\n%s", code, out, errs)
	}
}

// The coordinator's live page (--http), with two agents fuzzing, renders
// in headless Chromium: both agents in the agents table, the plots, one
// findings row per finding directory, and every finding link served.
func TestCoordinatorPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser test runs campaigns and Chromium (about 30 s)")
	}
	bin := testutil.Chromium(t)
	old := campaign.StatsEvery
	campaign.StatsEvery = 300 * time.Millisecond
	defer func() { campaign.StatsEvery = old }()
	srv, err := dist.StartServer(dist.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := dist.Open(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	addr, err := serveLive(ctx, "127.0.0.1:0", st, "live", wd, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, id := range []string{"agent-a", "agent-b"} {
		tg, err := sim.NewTarget(sim.Config{Mode: sim.Async, Mutant: "async-rollback-partial"})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dist.RunWorker(actx, dist.WorkerConfig{Store: st, ID: id, Kind: "sim", Target: tg, MinimizeRuns: 30, Heartbeat: 200 * time.Millisecond})
		}()
	}
	defer func() { stopAgents(); wg.Wait() }()
	w, _ := gen.Profile("default")
	cs, err := dist.RunCoordinator(ctx, dist.CoordinatorConfig{Store: st, Campaign: "live", Seed: 3, Programs: 300,
		Target: "sim", Weights: w, Workdir: wd, Queue: 16})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Findings == 0 {
		t.Fatal("the campaign found nothing")
	}
	time.Sleep(time.Second) // a poll after the last result
	url := "http://" + addr + "/"
	dom := testutil.DumpDOM(t, bin, url)
	if testutil.BodyAttr(dom, "data-rendered") != "1" {
		t.Fatal("the live page's load handler did not run")
	}
	if n, _ := strconv.Atoi(testutil.BodyAttr(dom, "data-svg")); n < 2 {
		t.Errorf("live page: %d plots rendered, want 2", n)
	}
	for _, a := range []string{"<td>agent-a</td><td>ok</td>", "<td>agent-b</td><td>ok</td>"} {
		if !strings.Contains(dom, a) {
			t.Errorf("live page lacks agent row %q", a)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(wd, "findings", "*", "signature"))
	rows := regexp.MustCompile(`<tr><td class="mono"><a href="(findings/[^"]+/report.html)">`).FindAllStringSubmatch(dom, -1)
	if len(rows) != len(dirs) || len(rows) == 0 {
		t.Errorf("findings table: %d rows for %d finding directories", len(rows), len(dirs))
	}
	for _, r := range rows {
		resp, err := http.Get(url + r[1])
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %v %v", r[1], err, resp)
			continue
		}
		resp.Body.Close()
	}
	testutil.Screenshot(t, bin, url, filepath.Join(testutil.ArtifactDir(t), "live.png"), 1300, 1400)
}

// TestRunKilledHelper is the run that TestRunKilledResumes kills; it does
// nothing on its own.
func TestRunKilledHelper(t *testing.T) {
	wd := os.Getenv("FORKFUZZ_KILL_WORKDIR")
	if wd == "" {
		t.Skip("the process TestRunKilledResumes starts and kills")
	}
	forkfuzz(t, "run", "--target", "sim", "--fork", "async", "--duration", "2m", "--seed", "21", "--workdir", wd, "-q")
}

// A run killed with SIGKILL and started again on the same workdir
// continues from its corpus: the second run restores the programs the
// first kept and mutates some of them.
func TestRunKilledResumes(t *testing.T) {
	wd := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunKilledHelper$")
	cmd.Env = append(os.Environ(), "FORKFUZZ_KILL_WORKDIR="+wd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(wd, "corpus", "sim-async")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if names, _ := filepath.Glob(filepath.Join(dir, "*.ffz")); len(names) >= 30 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the first run kept no 30 programs in 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	kept := map[string]bool{}
	names, _ := filepath.Glob(filepath.Join(dir, "*.ffz"))
	finds, _ := filepath.Glob(filepath.Join(dir, campaign.CorpusFindings, "*.ffz"))
	for _, n := range append(names, finds...) {
		kept[strings.TrimSuffix(filepath.Base(n), ".ffz")] = true
	}
	t.Logf("killed the first run with %d programs kept", len(kept))
	code, out, errs := forkfuzz(t, "run", "--target", "sim", "--fork", "async", "--programs", "80", "--seed", "22", "--workdir", wd, "-q")
	if code == exitError {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out, errs)
	}
	if want := fmt.Sprintf("restored %d programs", len(kept)); !strings.Contains(out, want) {
		t.Fatalf("second run does not say %q:\n%s", want, out)
	}
	ms := regexp.MustCompile(`program \d+: mutated from restored corpus program ([0-9a-f]+)`).FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		t.Fatalf("the second run mutated no program of the killed one:\n%s", out)
	}
	for _, m := range ms {
		if !kept[m[1]] {
			t.Errorf("mutated %s, which the killed run did not keep", m[1])
		}
	}
	t.Logf("%d logged mutations of the killed run's programs, e.g. %q", len(ms), ms[0][0])
}
