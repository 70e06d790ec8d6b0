package dist

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// A kernel image is published once, by content hash, and fetched and
// verified by agents; a second publication stores nothing new.
func TestKernelObjectStore(t *testing.T) {
	_, st := testConnected(t)
	ctx := context.Background()
	img := make([]byte, 3<<20+17) // several object-store chunks
	rand.Read(img)
	path := filepath.Join(t.TempDir(), "bzImage")
	os.WriteFile(path, img, 0o644)
	sum, err := PutKernel(ctx, st, path)
	if err != nil {
		t.Fatal(err)
	}
	info1, _ := st.Kernels.GetInfo(ctx, sum)
	if sum2, err := PutKernel(ctx, st, path); err != nil || sum2 != sum {
		t.Fatalf("second publication: %s %v", sum2, err)
	}
	info2, _ := st.Kernels.GetInfo(ctx, sum)
	if info1.NUID != info2.NUID {
		t.Fatal("the image was stored twice")
	}
	cache := t.TempDir()
	got, err := FetchKernel(ctx, st, sum, cache)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(got)
	if !bytes.Equal(b, img) {
		t.Fatal("fetched image differs")
	}
	// A corrupted cache entry is fetched again.
	os.WriteFile(got, []byte("garbage"), 0o644)
	if _, err := FetchKernel(ctx, st, sum, cache); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, img) {
		t.Fatal("corrupted cache entry not replaced")
	}
	if _, err := FetchKernel(ctx, st, strings.Repeat("0", 64), cache); err == nil {
		t.Fatal("fetched an image that was never published")
	}
}

// The coordinator's metrics count the stored programs and see the agents.
func TestMetrics(t *testing.T) {
	_, st := testConnected(t)
	m := NewMetrics()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, _, err := m.Serve(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		RunWorker(actx, WorkerConfig{Store: st, ID: "m1", Kind: "sim", Target: simTarget(t, ""), Heartbeat: 50 * time.Millisecond})
	}()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Workdir: t.TempDir(), Campaign: "m", Seed: 2, Programs: 40, Target: "sim",
		Weights: gen.DefaultWeights(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	waitFor(t, 10*time.Second, "a heartbeat reaches the gauges", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(body), `forkfuzz_agent_programs{agent="m1",target="sim"}`)
	})
	stopAgent()
	<-agentDone
	for _, want := range []string{
		"forkfuzz_programs_total 40",
		fmt.Sprintf("forkfuzz_forks_total %d", cs.Forks),
		"forkfuzz_published_total 40",
		`forkfuzz_agent_last_heartbeat_seconds{agent="m1",target="sim"}`,
		`forkfuzz_agent_programs{agent="m1",target="sim"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// A metrics address that cannot be bound is an error when the server
// starts, not a silent absence of metrics.
func TestMetricsBindFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, _, err = NewMetrics().Serve(context.Background(), ln.Addr().String(), nil)
	if err == nil || !strings.Contains(err.Error(), "metrics: listening on "+ln.Addr().String()) {
		t.Fatalf("serving on a bound port: %v", err)
	}
}

// CampaignKernel names the newest unfinished qemu campaign's kernel, ""
// when there is no campaign, and an error when the store cannot be read
// (an agent must not boot the default kernel then).
func TestCampaignKernel(t *testing.T) {
	srv, st := testConnected(t)
	ctx := context.Background()
	if k, err := CampaignKernel(ctx, st); k != "" || err != nil {
		t.Fatalf("empty store: %q, %v", k, err)
	}
	put := func(name string, s State) {
		b, _ := json.Marshal(s)
		if _, err := st.State.Put(ctx, name, b); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	put("old", State{Campaign: "old", Target: "qemu", Kernel: "k-old", Updated: now.Add(-time.Hour)})
	put("new", State{Campaign: "new", Target: "qemu", Kernel: "k-new", Updated: now})
	put("done", State{Campaign: "done", Target: "qemu", Kernel: "k-done", Finished: true, Updated: now.Add(time.Hour)})
	put("sim", State{Campaign: "sim", Target: "sim", Updated: now.Add(time.Hour)})
	if k, err := CampaignKernel(ctx, st); k != "k-new" || err != nil {
		t.Fatalf("campaigns: %q, %v; want k-new", k, err)
	}
	if _, err := st.State.Put(ctx, "junk", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := CampaignKernel(ctx, st); err == nil || !strings.Contains(err.Error(), "campaign state junk") {
		t.Fatalf("an unreadable state: %v", err)
	}
	st.State.Delete(ctx, "junk")
	srv.Shutdown()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if k, err := CampaignKernel(cctx, st); err == nil {
		t.Fatalf("a store that is gone: %q and no error", k)
	}
}

// Observations too large for a message go through the object store, are
// judged like the others, and are deleted once stored.
func TestLargeObservations(t *testing.T) {
	_, st := testConnectedTo(t, ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), MaxPayload: 80 << 10})
	// 40 programs with large observations: a few seconds idle, 30 s was
	// not enough on a loaded 2-core machine once the generator stored to
	// every page after some forks.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	actx, stopAgent := context.WithCancel(ctx)
	var as *WorkerStats
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		as, _ = RunWorker(actx, WorkerConfig{Store: st, ID: "big", Kind: "sim", Target: simTarget(t, ""), Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Workdir: t.TempDir(), Campaign: "big", Seed: 4, Programs: 40, Target: "sim", Weights: gen.DefaultWeights()})
	stopAgent()
	<-agentDone
	if err != nil {
		t.Fatal(err)
	}
	if cs.Done != 40 || cs.Programs != 40 {
		t.Fatalf("%+v", *cs)
	}
	if as.Large == 0 {
		t.Fatal("no observation exceeded 16 KiB; the test proves nothing")
	}
	lister, err := st.Obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	if len(lister) != 0 {
		t.Fatalf("%d stored observations left behind", len(lister))
	}
	t.Logf("%d of 40 observations went through the object store", as.Large)
}
