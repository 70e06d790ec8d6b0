package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// testServer starts an embedded server on a free loopback port.
func testServer(t testing.TB, sec Security) *Server {
	t.Helper()
	s, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Security: sec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// testConnected starts a server and opens the store over the in-process
// connection.
func testConnected(t testing.TB) (*Server, *Store) {
	t.Helper()
	return testConnectedTo(t, ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
}

// testConnectedTo is testConnected with a server configuration.
func testConnectedTo(t testing.TB, cfg ServerConfig) (*Server, *Store) {
	t.Helper()
	srv, err := StartServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return srv, testStore(t, nc)
}

func testStore(t testing.TB, nc *nats.Conn) *Store {
	t.Helper()
	s, err := Open(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

func simTarget(t testing.TB, mutant string) *sim.Target {
	tg, err := sim.NewTarget(sim.Config{Mode: sim.Mode(2), Mutant: mutant, SchedSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestInProcessCampaign runs a coordinator and three agents in one process
// on a simulated kernel with a bug, and checks that every program has one
// Done record, findings are stored once per signature with their
// directories, and the status shows it.
func TestInProcessCampaign(t *testing.T) {
	_, st := testConnected(t)
	// 300 programs: the mutant is rare in generated programs (150 of
	// seed 3 sometimes missed it once the generator drew remapfile).
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := RunWorker(actx, WorkerConfig{Store: st, ID: fmt.Sprintf("a%d", k), Kind: "sim",
				Target: simTarget(t, "async-mprotect-nosync"), MinimizeRuns: 50, Log: testLog(t)})
			if err != nil && actx.Err() == nil {
				t.Error(err)
			}
		}()
	}
	workdir := t.TempDir()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Campaign: "t1", Seed: 3, Programs: n, Target: "sim",
		Weights: gen.DefaultWeights(), Workdir: workdir, Queue: 16, AckWait: 5 * time.Second, Log: testLog(t)})
	stopAgents()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *cs)
	if cs.Done != n || cs.Programs+cs.HarnessErrors != n {
		t.Fatalf("done %d, programs %d, harness errors %d; want %d done", cs.Done, cs.Programs, cs.HarnessErrors, n)
	}
	if cs.Findings == 0 {
		t.Fatalf("the mutant async-mprotect-nosync was not found in %d programs", n)
	}
	keys := doneKeys(t, st, "t1")
	for i := int64(0); i < n; i++ {
		if !keys[i] {
			t.Errorf("program %d has no done record", i)
		}
	}
	if len(keys) != n {
		t.Errorf("%d done records, want %d", len(keys), n)
	}
	dirs, _ := filepath.Glob(filepath.Join(workdir, "findings", "*", "signature"))
	if int64(len(dirs)) != cs.Findings {
		t.Errorf("%d finding directories for %d findings", len(dirs), cs.Findings)
	}
	// The coordinator asked an agent to minimize each new finding and
	// did not finish before every answer was in its directory.
	minimized, _ := filepath.Glob(filepath.Join(workdir, "findings", "*", "minimized.ffz"))
	if int64(len(minimized)) != cs.Findings {
		t.Errorf("%d of %d findings carry a minimized program", len(minimized), cs.Findings)
	}
	status, err := ReadStatus(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	status.Print(&b, time.Now(), 5*time.Second)
	t.Logf("status:\n%s", b.String())
	for _, want := range []string{"campaign t1 (finished", fmt.Sprintf("%d done of %d", n, n), "agents: 3", "a0 ", "stopped"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q", want)
		}
	}
	// A second coordinator of the finished campaign finds nothing to do
	// and counts what the first stored.
	cs2, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Campaign: "t1", Programs: n, Target: "sim", Weights: gen.DefaultWeights(), Workdir: workdir})
	if err != nil {
		t.Fatal(err)
	}
	if !cs2.Resumed || cs2.Done != n || cs2.Findings != cs.Findings || cs2.Published != 0 {
		t.Fatalf("resumed finished campaign: %+v", *cs2)
	}
}

// An agent that does not minimize answers the coordinator's request so;
// the finding keeps its program, says why it is not minimized, and the
// campaign finishes.
func TestMinimizeSkipped(t *testing.T) {
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second) // generous: CI runs QEMU tests beside it
	defer cancel()
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		RunWorker(actx, WorkerConfig{Store: st, ID: "nomin", Kind: "sim", Target: simTarget(t, "async-mprotect-nosync")})
	}()
	workdir := t.TempDir()
	// 300 programs: the mutant is rare in generated programs, and the
	// first 150 of seed 3 missed it once the generator drew remapfile.
	const programs = 300
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Campaign: "nomin", Seed: 3, Programs: programs, Target: "sim",
		Weights: gen.DefaultWeights(), Workdir: workdir, Queue: 16})
	stopAgent()
	<-agentDone
	if err != nil {
		t.Fatal(err)
	}
	if cs.Done != programs {
		t.Fatalf("%d of %d programs done before the timeout", cs.Done, programs)
	}
	if cs.Findings == 0 {
		t.Fatalf("the mutant async-mprotect-nosync was not found in %d programs; the test proves nothing", programs)
	}
	recs := findingRecords(ctx, t, st)
	for _, rec := range recs {
		if rec.Minimized != nil || !strings.Contains(rec.MinimizeSkipped, "agent nomin does not minimize") {
			t.Errorf("finding %s: minimized %v, skipped %q", rec.Meta.Signature, rec.Minimized != nil, rec.MinimizeSkipped)
		}
	}
	if int64(len(recs)) != cs.Findings {
		t.Errorf("%d finding records for %d findings", len(recs), cs.Findings)
	}
	if m, _ := filepath.Glob(filepath.Join(workdir, "findings", "*", "minimized.ffz")); len(m) != 0 {
		t.Errorf("%d minimized programs from an agent that does not minimize", len(m))
	}
}

// doneKeys returns the indices with a done record in campaign c.
func doneKeys(t testing.TB, st *Store, c string) map[int64]bool {
	t.Helper()
	keys := map[int64]bool{}
	err := watchAll(context.Background(), st.Done, c+".>", func(key string, v []byte) error {
		var i int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(key, c+"."), "%d", &i); err != nil {
			return err
		}
		var d Done
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		keys[i] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// brokenTarget cannot run anything: every run is a harness error.
type brokenTarget struct{ noopTarget }

func (brokenTarget) Run(*prog.Program, agents.Options) (*obs.Observation, error) {
	return nil, errors.New("qemu would not start")
}

// An agent whose target keeps failing hands work back (another agent may
// do better), records a program as a harness error on its third delivery,
// and gives up after five harness errors in a row, saying why.
func TestAgentGivesUpOnBrokenTarget(t *testing.T) {
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second) // generous: CI runs QEMU tests beside it
	defer cancel()
	cctx, stopCoord := context.WithCancel(ctx)
	coordDone := make(chan *Stats, 1)
	go func() {
		cs, _ := RunCoordinator(cctx, CoordinatorConfig{Store: st, Workdir: t.TempDir(), Campaign: "broken", Seed: 1, Programs: 3, Target: "noop",
			Weights: gen.DefaultWeights(), Queue: 1})
		coordDone <- cs
	}()
	_, err := RunWorker(ctx, WorkerConfig{Store: st, ID: "b", Kind: "noop", Target: brokenTarget{}})
	if err == nil || !strings.Contains(err.Error(), "5 harness errors in a row, last: qemu would not start") {
		t.Fatalf("agent: %v", err)
	}
	waitFor(t, 30*time.Second, "the coordinator stores a harness error", func() bool {
		return len(doneKeys(t, st, "broken")) > 0
	})
	stopCoord()
	cs := <-coordDone
	if cs.HarnessErrors < 1 || cs.Programs != 0 {
		t.Fatalf("coordinator: %+v", *cs)
	}
	t.Logf("agent: %v; coordinator stored %d harness errors", err, cs.HarnessErrors)
}

// An agent that cannot encode a result (here: every result with an
// observation) retries on the next two deliveries, then stores a harness
// error for the program instead of running it forever.
func TestAgentStopsRetryingUnencodableResult(t *testing.T) {
	encodeFault = errors.New("object store gone")
	defer func() { encodeFault = nil }()
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second) // generous: CI runs QEMU tests beside it
	defer cancel()
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	go RunWorker(actx, WorkerConfig{Store: st, ID: "enc", Kind: "noop", Target: noopTarget{}, MaxHarnessErrors: 100})
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Workdir: t.TempDir(), Campaign: "enc", Seed: 1, Programs: 2, Target: "noop",
		Weights: gen.DefaultWeights(), Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Done != 2 || cs.HarnessErrors != 2 || cs.Programs != 0 {
		t.Fatalf("coordinator: want 2 programs done as harness errors, got %+v", *cs)
	}
}

// With a duration, the coordinator stops publishing when it ends and
// waits for the work it published.
func TestCoordinatorDuration(t *testing.T) {
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second) // generous: CI runs QEMU tests beside it
	defer cancel()
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	go RunWorker(actx, WorkerConfig{Store: st, ID: "d", Kind: "sim", Target: simTarget(t, "")})
	start := time.Now()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Workdir: t.TempDir(), Campaign: "dur", Seed: 1, Duration: time.Second, Target: "sim",
		Weights: gen.DefaultWeights(), Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < time.Second || el > 100*time.Second || cs.Done == 0 || cs.Done != cs.Published {
		t.Fatalf("after %v: %+v", el, *cs)
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The coordinator judges each stored result exactly once, on several
// goroutines at a time; workers do not judge.
func TestJudgedOnceInParallel(t *testing.T) {
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second) // generous: CI runs QEMU tests beside it
	defer cancel()
	actx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			RunWorker(actx, WorkerConfig{Store: st, ID: fmt.Sprintf("w%d", k), Kind: "noop", Target: noopTarget{}})
		}()
	}
	var mu sync.Mutex
	calls, inFlight, maxInFlight := 0, 0, 0
	j := func(*prog.Program, *obs.Observation, error) (*judge.Verdict, error) {
		mu.Lock()
		calls++
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // a judge that takes a while
		mu.Lock()
		inFlight--
		mu.Unlock()
		return &judge.Verdict{}, nil
	}
	const n = 200
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Workdir: t.TempDir(), Campaign: "once", Seed: 1, Programs: n, Target: "noop",
		Weights: gen.DefaultWeights(), Queue: 64, Judges: 4, judge: j})
	stopWorkers()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if cs.Done != n {
		t.Fatalf("%d of %d done", cs.Done, n)
	}
	// A duplicate found already done is dropped before judging; one
	// handled at the same time as its twin is judged and then dropped.
	if int64(calls) < cs.Done || int64(calls) > cs.Done+cs.Duplicates {
		t.Errorf("%d judge calls for %d stored results and %d duplicates", calls, cs.Done, cs.Duplicates)
	}
	if maxInFlight < 2 {
		t.Errorf("at most %d judge call at a time with 4 judges", maxInFlight)
	}
	t.Logf("%d judge calls, up to %d at a time, for %d results (%d duplicates)", calls, maxInFlight, cs.Done, cs.Duplicates)
}

// TestClearWorkKeepsOtherCampaigns: a finished campaign removes its own
// leftover work (answered by an agent that died before acknowledging it)
// and nothing of another campaign's, however sparse the queue.
func TestClearWorkKeepsOtherCampaigns(t *testing.T) {
	_, st := testConnected(t)
	ctx := context.Background()
	pub := func(id string) {
		t.Helper()
		if _, err := st.JS.Publish(ctx, workSubject("sim"), []byte("{}"), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		pub(fmt.Sprintf("other/%d", i))
		pub(fmt.Sprintf("mine/%d", i))
	}
	pub("mine/min/sig")
	pub("mine-too/1") // a campaign whose name extends "mine"
	// Leave holes in the sequence range, as acknowledged work does.
	for seq := uint64(1); seq <= 60; seq += 3 {
		if err := st.Work.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	before, err := st.Work.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &coord{cfg: CoordinatorConfig{Campaign: "mine"}, s: st, log: testLog(t)}
	n, err := c.clearWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, err := st.Work.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]int{}
	for seq := after.State.FirstSeq; seq <= after.State.LastSeq; seq++ {
		m, err := st.Work.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		left[strings.SplitN(m.Header.Get(jetstream.MsgIDHeader), "/", 2)[0]]++
	}
	if left["mine"] != 0 || left["other"] == 0 || left["mine-too"] != 1 {
		t.Errorf("left in the queue by campaign: %v", left)
	}
	if int(before.State.Msgs-after.State.Msgs) != n {
		t.Errorf("clearWork says %d removed, the queue shrank by %d", n, before.State.Msgs-after.State.Msgs)
	}
	t.Logf("%d messages before, %d removed, left: %v", before.State.Msgs, n, left)
}

// coverSim is the simulated kernel with made-up kernel coverage: one edge
// per pair of consecutive operation kinds, so new combinations are new.
type coverSim struct {
	*sim.Target
	asked *atomic.Int32 // runs that asked for the kernel's symbols
	// covered and censused count the runs that collected coverage and
	// took the page census (agents.Options.NoCover, NoForkPages).
	covered, censused *atomic.Int32
}

const fakeKallsyms = "ffffffff81000000 T kernel_clone\nffffffff81000400 T dup_mmap\n"

func (c coverSim) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	o, err := c.Target.Run(p, opts)
	if o == nil {
		return o, err
	}
	if !opts.NoForkPages {
		c.censused.Add(1)
	}
	if opts.NoCover {
		o.Cover = &obs.Coverage{Unavailable: "off (asked not to collect)"}
		return o, err
	}
	c.covered.Add(1)
	cv := &obs.Coverage{Procs: 1}
	seen := map[uint32]bool{}
	prev := ""
	for _, op := range p.Ops {
		kind := fmt.Sprintf("%v/%d/%d", op.Kind, op.Proc, op.Advice)
		h := fnv.New32a()
		h.Write([]byte(prev + ">" + kind))
		if e := h.Sum32(); !seen[e] {
			seen[e] = true
			cv.Edges = append(cv.Edges, e)
			cv.PCs = append(cv.PCs, uint64(e))
		}
		prev = kind
	}
	if opts.Symbols {
		cv.Symbols = fakeKallsyms
		if c.asked != nil {
			c.asked.Add(1)
		}
	}
	o.Cover = cv
	return o, err
}

// TestDistCoverageGuided: a distributed campaign keeps the coverage corpus
// and draws programs from it when guided, and says coverage is
// unavailable on a target that collects none.
func TestDistCoverageGuided(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cover  bool
		blind  bool
		status string
	}{
		{"guided", true, false, "% from corpus)"},
		{"blind", true, true, "(blind)"},
		{"no coverage", false, false, "coverage: unavailable (the target collects none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st := testConnected(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			actx, stopAgent := context.WithCancel(ctx)
			var tg agents.Target = simTarget(t, "")
			var asked, covered, censused atomic.Int32
			if tc.cover {
				tg = coverSim{simTarget(t, ""), &asked, &covered, &censused}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if _, err := RunWorker(actx, WorkerConfig{Store: st, ID: "a0", Kind: "sim", Target: tg, Log: testLog(t)}); err != nil && actx.Err() == nil {
					t.Error(err)
				}
			}()
			workdir := t.TempDir()
			w := gen.DefaultWeights()
			cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Campaign: "cov", Seed: 5, Programs: 120, Target: "sim",
				Weights: w, Workdir: workdir, Queue: 4, Blind: tc.blind, Log: testLog(t)})
			stopAgent()
			<-done
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; counts %+v", cs.Cover, cs.CoverCounts)
			if !strings.Contains(cs.Cover, tc.status) {
				t.Errorf("coverage phrase %q, want %q in it", cs.Cover, tc.status)
			}
			if !tc.cover {
				return
			}
			// Sampled as a local campaign does: coverage for every
			// corpus mutation and one fresh program in 4 when guided,
			// one program in 8 when blind; the census the same way
			// with one in 4 (campaign.Config.CoverFor, CensusFor).
			c := cs.CoverCounts
			if c == nil || c.Corpus == 0 {
				t.Fatalf("no coverage corpus: %+v", c)
			}
			want := int32(120 / campaign.DefaultBlindCoverEvery)
			wantCensus := int32(120 / campaign.DefaultCensusEvery)
			if !tc.blind {
				every := int32(campaign.DefaultGuidedCoverEvery)
				want = int32(c.FromCorpus) + (120-int32(c.FromCorpus)+every-1)/every
				every = int32(campaign.DefaultCensusEvery)
				wantCensus = int32(c.FromCorpus) + (120-int32(c.FromCorpus)+every-1)/every
			}
			if covered.Load() != want || censused.Load() != wantCensus {
				t.Errorf("%d runs collected coverage, %d took the census; want %d and %d", covered.Load(), censused.Load(), want, wantCensus)
			}
			files, _ := filepath.Glob(filepath.Join(workdir, "corpus", "*", "*.ffz"))
			if len(files) != c.Corpus {
				t.Errorf("%d corpus files for a corpus of %d", len(files), c.Corpus)
			}
			if tc.blind && c.FromCorpus != 0 || !tc.blind && (c.FromCorpus == 0 || c.Drawn < 100) {
				t.Errorf("blind=%v: %d of %d programs drawn from the corpus", tc.blind, c.FromCorpus, c.Drawn)
			}
			// The workers sent the kernel's symbols once (program 0
			// asks; after it the corpus has them), kept for forkfuzz cover.
			syms, _ := filepath.Glob(filepath.Join(workdir, "corpus", "*", "kallsyms"))
			if n := asked.Load(); n < 1 || n > 2 || len(syms) != 1 {
				t.Fatalf("%d runs asked for symbols, kallsyms files %v; want 1 or 2 asks and one file", n, syms)
			}
			if b, err := os.ReadFile(syms[0]); err != nil || string(b) != fakeKallsyms {
				t.Errorf("kallsyms %q (%v), want the target's", b, err)
			}
		})
	}
}

// coverlessCrash is the simulated kernel whose executor "dies" on every
// run without coverage and without the page census: a failure that shows
// only as its program ran.
type coverlessCrash struct{ *sim.Target }

func (c coverlessCrash) Run(p *prog.Program, opts agents.Options) (*obs.Observation, error) {
	if opts.NoCover && opts.NoForkPages {
		return nil, &executor.CrashError{Status: "signal: segmentation fault"}
	}
	return c.Target.Run(p, opts)
}

// A finding of a program that ran without coverage (a blind campaign's
// seven in eight) and without the census (three in four) is minimized
// that way too: otherwise the agent's reruns would not fail and the
// finding would stay unminimized.
func TestMinimizeKeepsNoCover(t *testing.T) {
	_, st := testConnected(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		RunWorker(actx, WorkerConfig{Store: st, ID: "a0", Kind: "sim", Target: coverlessCrash{simTarget(t, "")}, MinimizeRuns: 30, Log: testLog(t)})
	}()
	wd := t.TempDir()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Campaign: "nocover", Seed: 5, Programs: 3, Target: "sim",
		Weights: gen.DefaultWeights(), Workdir: wd, Queue: 1, Blind: true, Log: testLog(t)})
	stopAgent()
	<-agentDone
	if err != nil {
		t.Fatal(err)
	}
	if cs.Findings != 1 {
		t.Fatalf("%d findings, want 1 (programs 1 and 2 crash alike)", cs.Findings)
	}
	recs := findingRecords(ctx, t, st)
	if len(recs) != 1 {
		t.Fatalf("%d finding records, want 1", len(recs))
	}
	if rec := recs[0]; rec.Minimized == nil || rec.Minimized.NotRepeated || rec.Minimized.Replays == 0 || rec.Minimized.Reproduced != rec.Minimized.Replays {
		t.Errorf("finding %s (program %d): minimized %+v, want it repeated and reproduced on every replay", rec.Meta.Signature, rec.Meta.Index, rec.Minimized)
	}
	// The record and the directory keep it: the replay command and the
	// gate (which reads the seed file) run it without coverage too.
	if !recs[0].NoCover || !recs[0].NoCensus {
		t.Errorf("finding record of program %d: no_cover %v, no_census %v, want both", recs[0].Meta.Index, recs[0].NoCover, recs[0].NoCensus)
	}
	dir := filepath.Join(wd, "findings", campaign.DirName(recs[0].Meta.Signature))
	for file, want := range map[string]string{"replay": "--no-cover --no-census", "seed": "kcov off\ncensus off"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %q (%v), want %q in it", file, b, err, want)
		}
	}
}

// findingRecords reads every finding record the store holds.
func findingRecords(ctx context.Context, t *testing.T, st *Store) []FindingRecord {
	t.Helper()
	var recs []FindingRecord
	err := watchAll(ctx, st.Findings, ">", func(key string, v []byte) error {
		b, err := st.Repro.GetBytes(ctx, key)
		if err != nil {
			return err
		}
		var rec FindingRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
