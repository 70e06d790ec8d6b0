package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign/dist"
)

// run --dist goes through an in-process coordinator and agent over an
// embedded JetStream server, and finds what run finds.
func TestRunDist(t *testing.T) {
	dir := t.TempDir()
	// Blind: the simulated kernel has no KCOV, but its memory states
	// would make a small corpus whose draws space the fresh programs out,
	// and the 120 programs are seed 3's first fresh ones, which meet the
	// mutant.
	code, out, errs := forkfuzz(t, "run", "--dist", "--target", "sim", "--fork", "async", "--mutant", "async-mprotect-nosync",
		"--programs", "120", "--seed", "3", "--workdir", dir, "--minimize-runs", "30", "--blind", "-q")
	if code != exitFindings || !strings.Contains(out, "summary: campaign run: 120 programs") || !strings.Contains(out, "finding: ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	mins, _ := filepath.Glob(filepath.Join(dir, "findings", "*", "minimized.ffz"))
	if len(mins) == 0 {
		t.Fatalf("no minimized reproducer in %s", dir)
	}
}

// A worker or status without the token is refused with a clear error; with
// it, status prints the (empty) store.
func TestAgentNeedsCredentials(t *testing.T) {
	srv, err := dist.StartServer(dist.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Security: dist.Security{Token: "tok"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, _ := srv.Connect("t")
	if _, err := dist.Open(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	os.Unsetenv("FORKFUZZ_TOKEN")
	// "agent" is the worker's former name, still accepted.
	for _, name := range []string{"worker", "agent"} {
		code, _, errs := forkfuzz(t, name, "--coordinator", srv.URL, "--target", "sim")
		want := "forkfuzz worker: coordinator " + srv.URL + ": authorization violation: agent needs --token or --nkey-seed"
		if code != exitError || !strings.Contains(errs, want) {
			t.Fatalf("%s: exit %d, stderr %q; want %q", name, code, errs, want)
		}
	}
	conf := filepath.Join(t.TempDir(), "agent.conf")
	os.WriteFile(conf, []byte("token = tok\ncoordinator = "+srv.URL+"\n"), 0o600)
	code, out, errs := forkfuzz(t, "status", "--config", conf)
	if code != exitClean || !strings.Contains(out, "work queue: 0 queued") || !strings.Contains(out, "agents: 0") {
		t.Fatalf("status: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// A coordinator's --fork-impl names one of the executor's profiles; a bad
// one is refused before anything connects.
func TestCoordinatorForkImplFlag(t *testing.T) {
	code, _, errs := forkfuzz(t, "coordinator", "--fork-impl", "asyncfork", "--nats", "nats://127.0.0.1:1")
	if code != exitError || !strings.Contains(errs, `--fork-impl "asyncfork": want one of`) || !strings.Contains(errs, "async-fork") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// A coordinator for a target no worker can run is refused at once (it
// waited for ever); one whose workers never came exits 2, "no program
// ran", not 0 with a rate of the programs it published.
func TestCoordinatorRefusesNoWork(t *testing.T) {
	code, _, errs := forkfuzz(t, "coordinator", "--target", "nope", "--nats", "nats://127.0.0.1:1")
	if code != exitError || !strings.Contains(errs, `--target "nope": want one of native, qemu, sim`) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	defer func(w, s time.Duration) { dist.NoWorkerWarning, dist.StallAfter = w, s }(dist.NoWorkerWarning, dist.StallAfter)
	dist.NoWorkerWarning, dist.StallAfter = 200*time.Millisecond, 500*time.Millisecond
	dir := t.TempDir()
	code, out, errs := forkfuzz(t, "coordinator", "--target", "sim", "--duration", "1s", "--workdir", dir, "--listen", "127.0.0.1:0", "-q")
	if code != exitError || !strings.Contains(errs, "no program ran") || !strings.Contains(out, "abandoned:") || !strings.Contains(out, "(0.0 programs/s this run)") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}
