package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// WorkerConfig describes a worker (the `forkfuzz worker` process; it was
// called an agent, which is also what the wire fields, the JetStream names
// and the metric labels still say): it pulls work for its target kind,
// runs it on its own target (as many programs at once as the target has
// machines), and publishes the results.
type WorkerConfig struct {
	Store  *Store
	ID     string
	Kind   string // target kind: the work it pulls
	Target agents.Target
	// Kernel is the SHA-256 of the image the target boots ("": any); work
	// for another kernel is handed back.
	Kernel string
	// MinimizeRuns and MinimizeTime bound the minimization of a finding
	// the coordinator asks for (0 runs: answer that this agent does not
	// minimize).
	MinimizeRuns int
	MinimizeTime time.Duration
	// TargetArgs are the `forkfuzz exec` flags that reopen Target as this
	// agent runs it, and KernelID the kernel it runs: findings carry both
	// (their replay command and kernel identity are the agent's, not the
	// coordinator's).
	TargetArgs []string
	KernelID   campaign.KernelID
	// MaxHarnessErrors stops the agent after this many in a row (default 5).
	MaxHarnessErrors int
	Heartbeat        time.Duration // default 1s
	Log              *slog.Logger
}

// WorkerStats count what a worker did.
type WorkerStats struct {
	Programs      int64 // results published
	Redelivered   int64 // of which were redelivered work
	Duplicates    int64 // results the stream already had (dropped there)
	HarnessErrors int64
	Large         int64 // results whose observation went through the object store
}

type worker struct {
	cfg     WorkerConfig
	log     *slog.Logger
	st      WorkerStats
	busy    atomic.Int64
	harness atomic.Int64 // in a row
	fatal   chan error
	abort   context.CancelFunc // stops the agent after a fatal error
	lowWarn sync.Once          // an "arena low" program under a deferring --fork-impl
}

// RunWorker serves work until ctx ends or the target fails too often.
func RunWorker(ctx context.Context, cfg WorkerConfig) (*WorkerStats, error) {
	if err := ValidName(cfg.ID); err != nil {
		return nil, fmt.Errorf("dist: agent id: %w", err)
	}
	if cfg.MaxHarnessErrors <= 0 {
		cfg.MaxHarnessErrors = 5
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &worker{cfg: cfg, log: cfg.Log.With("agent", cfg.ID), fatal: make(chan error, 1)}
	workers := agents.Parallelism(cfg.Target)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hbDone := a.heartbeats(ctx, workers)
	defer func() { cancel(); <-hbDone }()

	cons, err := a.consumer(ctx)
	if err != nil {
		return a.stats(), err
	}
	a.abort = cancel
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for ctx.Err() == nil {
		it, err := cons.Messages(jetstream.PullMaxMessages(workers))
		if err != nil {
			a.log.Warn("pulling work", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		stopIt := context.AfterFunc(ctx, it.Stop)
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil {
					a.log.Warn("pulling work", "err", err)
				}
				break
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				m.Nak()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				a.serve(ctx, m)
			}()
		}
		stopIt()
		it.Stop()
		sleep(ctx, 200*time.Millisecond)
	}
	wg.Wait()
	select {
	case err := <-a.fatal:
		return a.stats(), err
	default:
		return a.stats(), nil
	}
}

func (a *worker) stats() *WorkerStats {
	return &WorkerStats{Programs: atomic.LoadInt64(&a.st.Programs), Redelivered: atomic.LoadInt64(&a.st.Redelivered),
		Duplicates: atomic.LoadInt64(&a.st.Duplicates), HarnessErrors: atomic.LoadInt64(&a.st.HarnessErrors),
		Large: atomic.LoadInt64(&a.st.Large)}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// consumer waits for the coordinator to create the work consumer.
func (a *worker) consumer(ctx context.Context) (jetstream.Consumer, error) {
	logged := false
	for {
		c, err := a.cfg.Store.JS.Consumer(ctx, WorkStream, WorkerConsumer(a.cfg.Kind))
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !logged {
			a.log.Info("waiting for a coordinator to publish work", "target", a.cfg.Kind, "err", err)
			logged = true
		}
		sleep(ctx, time.Second)
	}
}

func (a *worker) heartbeats(ctx context.Context, workers int) chan struct{} {
	done := make(chan struct{})
	host, _ := os.Hostname()
	put := func(stopped bool) {
		st := a.stats()
		b, _ := json.Marshal(Heartbeat{V: WireVersion, Agent: a.cfg.ID, Host: host, Target: a.cfg.Kind, Workers: workers,
			Busy: int(a.busy.Load()), Programs: st.Programs, Errors: st.HarnessErrors, Time: time.Now(), Stopped: stopped})
		timeout := 2 * time.Second
		if stopped {
			timeout = 500 * time.Millisecond // do not hold up a stopping agent
		}
		pctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		a.cfg.Store.Agents.Put(pctx, a.cfg.ID, b)
	}
	go func() {
		defer close(done)
		t := time.NewTicker(a.cfg.Heartbeat)
		defer t.Stop()
		put(false)
		for {
			select {
			case <-ctx.Done():
				put(true)
				return
			case <-t.C:
				if ctx.Err() == nil {
					put(false)
				}
			}
		}
	}()
	return done
}

// serve runs one work item and acknowledges it once its result is stored.
func (a *worker) serve(ctx context.Context, m jetstream.Msg) {
	a.busy.Add(1)
	defer a.busy.Add(-1)
	md, err := m.Metadata()
	if err != nil {
		a.log.Error("work without metadata", "err", err)
		m.Term()
		return
	}
	w, p, err := DecodeWork(m.Data())
	if err != nil {
		a.log.Error("dropping undecodable work", "err", err)
		m.TermWithReason(err.Error())
		return
	}
	if a.cfg.Kernel != "" && w.Kernel != "" && w.Kernel != a.cfg.Kernel {
		a.log.Warn("work for another kernel handed back", "index", w.Index, "kernel", w.Kernel)
		m.NakWithDelay(5 * time.Second)
		return
	}
	// Tell JetStream this agent is alive while the program runs (or is
	// minimized) and its result is stored.
	stop := keepAlive(m)
	defer stop()
	if w.Minimize != "" {
		a.minimize(ctx, m, w, p)
		return
	}
	if md.NumDelivered > 1 && a.stored(ctx, w) {
		// An agent stored the answer and died before acknowledging the
		// work: running it again would only produce a duplicate.
		atomic.AddInt64(&a.st.Duplicates, 1)
		a.ack(ctx, m, w)
		return
	}
	if p.Arena == prog.ArenaLow {
		if ft, ok := a.cfg.Target.(*agents.ForkImplTarget); ok && obs.DeferredProfile(ft.Profile) {
			a.lowWarn.Do(func() {
				a.log.Warn("a program says \"arena low\" under a deferring --fork-impl: its fork may look eager (a harness error); start the coordinator with --fork-impl "+ft.Profile+" so generated programs keep the top",
					"program", w.Index)
			})
		}
	}
	start := time.Now()
	o, runErr := a.cfg.Target.Run(p, agents.Options{Corrupt: w.Corrupt, Symbols: w.Symbols, NoCover: w.NoCover, NoForkPages: w.NoForkPages})
	r := &Result{V: WireVersion, Campaign: w.Campaign, CampaignSeed: w.CampaignSeed, Index: w.Index, Seed: w.Seed, Drawn: w.Drawn,
		Agent: a.cfg.ID, Delivered: md.NumDelivered, Target: a.cfg.Target.Name(), Program: w.Program, Observation: o,
		Err: NewRunError(runErr), Started: start, RunNanos: int64(time.Since(start)), TargetArgs: a.cfg.TargetArgs, NoCover: w.NoCover, NoForkPages: w.NoForkPages}
	if kid := a.cfg.KernelID; kid != (campaign.KernelID{}) || o != nil {
		if o != nil {
			kid.Observed = o.Kernel
		}
		r.KernelID = &kid
	}
	if r.Err != nil && r.Err.Kind == "harness" {
		atomic.AddInt64(&a.st.HarnessErrors, 1)
		n := a.harness.Add(1)
		a.log.Warn("harness error", "index", w.Index, "seed", w.Seed, "delivered", md.NumDelivered, "err", runErr)
		if n >= int64(a.cfg.MaxHarnessErrors) {
			select {
			case a.fatal <- fmt.Errorf("dist: agent %s: %d harness errors in a row, last: %w", a.cfg.ID, n, runErr):
			default:
			}
			a.abort()
		}
		if md.NumDelivered < 3 {
			m.NakWithDelay(time.Second) // maybe another agent's target can
			return
		}
	} else {
		a.harness.Store(0)
	}
	b, err := a.encode(ctx, r)
	if err != nil {
		a.log.Error("encoding a result", "index", w.Index, "delivered", md.NumDelivered, "err", err)
		if md.NumDelivered < maxEncodeDeliveries {
			m.NakWithDelay(time.Second) // maybe the object store comes back
			return
		}
		// A failure that outlives three deliveries is the agent's, not
		// the kernel's: store a harness error in the result's place
		// rather than run the program again forever.
		atomic.AddInt64(&a.st.HarnessErrors, 1)
		r.Observation, r.ObservationRef = nil, ""
		r.Err = &RunError{Kind: "harness", Message: fmt.Sprintf("the agent could not encode its result (delivery %d): %v", md.NumDelivered, err)}
		if b, err = EncodeResult(r); err != nil {
			m.TermWithReason(fmt.Sprintf("result not encodable: %v", err))
			return
		}
	}
	if !a.publish(ctx, resultSubject(w.Campaign), fmt.Sprintf("%s/%d", w.Campaign, w.Index), b) {
		return // not acknowledged: redelivered to someone
	}
	atomic.AddInt64(&a.st.Programs, 1)
	if md.NumDelivered > 1 {
		atomic.AddInt64(&a.st.Redelivered, 1)
	}
	a.ack(ctx, m, w)
}

// publish publishes b until JetStream stores it (or drops it as a
// duplicate); false if ctx ended first.
func (a *worker) publish(ctx context.Context, subject, msgID string, b []byte) bool {
	for {
		ack, err := a.cfg.Store.JS.Publish(ctx, subject, b, jetstream.WithMsgID(msgID))
		if err == nil {
			if ack.Duplicate {
				atomic.AddInt64(&a.st.Duplicates, 1)
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		a.log.Warn("publishing failed; retrying", "subject", subject, "msg", msgID, "err", err)
		sleep(ctx, 500*time.Millisecond)
	}
}

// stored reports whether w's result is already judged and stored (the
// coordinator's Done record); an error reading it counts as not stored.
func (a *worker) stored(ctx context.Context, w *Work) bool {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := a.cfg.Store.Done.Get(gctx, doneKey(w.Campaign, w.Index))
	return err == nil
}

// ack acknowledges work whose answer is stored.
func (a *worker) ack(ctx context.Context, m jetstream.Msg, w *Work) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		// The answer is stored; the work comes back and its second
		// answer is dropped as a duplicate.
		a.log.Warn("acknowledging work", "index", w.Index, "minimize", w.Minimize, "err", err)
	}
}

// encode encodes r; an observation too large for a message goes to the
// object store first.
// maxEncodeDeliveries is the delivery of a work item on which an agent
// that cannot encode its result stores a harness error instead.
const maxEncodeDeliveries = 3

// encodeFault, when set (tests), makes encoding a result with an
// observation fail.
var encodeFault error

func (a *worker) encode(ctx context.Context, r *Result) ([]byte, error) {
	if encodeFault != nil && r.Observation != nil {
		return nil, encodeFault
	}
	b, err := EncodeResult(r)
	if err != nil {
		return nil, err
	}
	limit := int(a.cfg.Store.JS.Conn().MaxPayload()) - 64<<10
	if len(b) <= limit || r.Observation == nil {
		return b, nil
	}
	ob, err := EncodeObservation(r.Observation)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s.%d.%s.%d", r.Campaign, r.Index, r.Agent, r.Delivered)
	// Chunks of the object store's default size (128 KiB) exceed a server
	// whose max_payload is smaller: the put failed and the work item was
	// redelivered forever. Half the payload limit leaves room for headers.
	chunk := uint32(min(128<<10, a.cfg.Store.JS.Conn().MaxPayload()/2))
	meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunk}}
	if _, err := a.cfg.Store.Obs.Put(ctx, meta, bytes.NewReader(ob)); err != nil {
		return nil, fmt.Errorf("observation of %d bytes to the object store: %w", len(ob), err)
	}
	atomic.AddInt64(&a.st.Large, 1)
	a.log.Debug("large observation sent through the object store", "index", r.Index, "bytes", len(ob))
	c := *r
	c.Observation, c.ObservationRef = nil, name
	return EncodeResult(&c)
}

// keepAlive marks m in progress regularly until the returned function is
// called.
func keepAlive(m jetstream.Msg) func() {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				m.InProgress()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// minimize answers a minimization request: it reduces the finding's
// program while its signature reproduces on this agent's target (Reduce
// judges its own runs) and publishes the MinimizeResult. The coordinator
// updates the finding with it.
func (a *worker) minimize(ctx context.Context, m jetstream.Msg, w *Work, p *prog.Program) {
	r := &MinimizeResult{V: WireVersion, Campaign: w.Campaign, Index: w.Index, Agent: a.cfg.ID, Minimized: Minimized{Signature: w.Minimize}}
	if a.cfg.MinimizeRuns <= 0 {
		r.Skipped = fmt.Sprintf("agent %s does not minimize (--minimize-runs 0)", a.cfg.ID)
	} else {
		// Minimized as the program ran: with or without coverage and
		// the census.
		f := &campaign.Finding{Issue: judge.Issue{Signature: w.Minimize}, Program: p, NoCover: w.NoCover, NoCensus: w.NoForkPages, Sites: campaign.SitesOf(w.Sites)}
		campaign.Reduce(a.cfg.Target, f, a.cfg.MinimizeRuns, a.cfg.MinimizeTime, w.Corrupt)
		if ctx.Err() != nil {
			return // cut short: not acknowledged, so redelivered to someone
		}
		a.log.Info("minimized", "signature", w.Minimize, "ops", len(f.Minimized.Ops), "from", len(p.Ops),
			"reproduced", fmt.Sprintf("%d/%d", f.Reproduced, f.Replays))
		r.Minimized = Minimized{Signature: w.Minimize, Program: string(f.Minimized.Format()), Observation: f.MinObs,
			Explanation: f.MinIssue.Explanation, Runs: f.MinRuns, Replays: f.Replays, Reproduced: f.Reproduced,
			NotRepeated: f.NotRepeated, Aimed: f.AimNote, AimRuns: f.AimRuns}
		if f.MinTries > 1 {
			r.Minimized.Tries = f.MinTries
		}
	}
	b, err := json.Marshal(r)
	if limit := int(a.cfg.Store.JS.Conn().MaxPayload()) - 64<<10; err == nil && len(b) > limit {
		a.log.Warn("the minimized observation is too large for a message; sent without it", "signature", w.Minimize, "bytes", len(b))
		r.Minimized.Observation = nil
		b, err = json.Marshal(r)
	}
	if err != nil {
		a.log.Error("encoding a minimize result", "signature", w.Minimize, "err", err)
		m.NakWithDelay(time.Second)
		return
	}
	if !a.publish(ctx, minimizedSubject(w.Campaign), minimizeMsgID(w.Campaign, w.Minimize), b) {
		return
	}
	a.ack(ctx, m, w)
}
