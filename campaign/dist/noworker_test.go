package dist

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// A coordinator with --duration and no worker used to wait for ever: it
// warns that no worker answers, and once its duration is over and no
// result came for StallAfter it stops, saying how many programs no worker
// did (the campaign stays resumable).
func TestCoordinatorNoWorker(t *testing.T) {
	defer func(w, s time.Duration) { NoWorkerWarning, StallAfter = w, s }(NoWorkerWarning, StallAfter)
	NoWorkerWarning, StallAfter = 500*time.Millisecond, time.Second
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var progress bytes.Buffer
	t0 := time.Now()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Campaign: "lonely", Seed: 1, Duration: time.Second, Target: "sim",
		Weights: gen.DefaultWeights(), Workdir: t.TempDir(), Queue: 8, Progress: &progress, ProgressLines: true, ProgressEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil || time.Since(t0) > 10*time.Second {
		t.Fatalf("the coordinator ran %v", time.Since(t0))
	}
	if cs.Done != 0 || cs.Abandoned != 8 {
		t.Fatalf("done %d, abandoned %d, want 0 and 8", cs.Done, cs.Abandoned)
	}
	if !strings.Contains(progress.String(), "no worker has returned a result") {
		t.Fatalf("no warning: %q", progress.String())
	}
}

// A worker facing an unreachable coordinator says so at once (it printed
// nothing until killed), and keeps trying.
func TestDialSaysItWaits(t *testing.T) {
	var log bytes.Buffer
	defer func(w io.Writer) { DialLog = w }(DialLog)
	DialLog = &log
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, "nats://127.0.0.1:1", "test", Security{})
	if err == nil {
		t.Fatal("connected to nothing")
	}
	if !strings.Contains(log.String(), "coordinator nats://127.0.0.1:1: not reachable") {
		t.Fatalf("log %q", log.String())
	}
}
