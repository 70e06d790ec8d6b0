package dist

import (
	"context"
	"encoding/json"
	"errors"
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

// AgentConfig describes an agent: it pulls work for its target kind, runs
// it on its own target (as many programs at once as the target has
// machines), and publishes the results.
type AgentConfig struct {
	Store  *Store
	ID     string
	Kind   string // target kind: the work it pulls
	Target agents.Target
	// Kernel is the SHA-256 of the image the target boots ("": any); work
	// for another kernel is handed back.
	Kernel string
	// MinimizeRuns and MinimizeTime bound the minimization of a signature
	// not yet in the findings bucket (0 runs: do not minimize).
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

// AgentStats count what an agent did.
type AgentStats struct {
	Programs      int64 // results published
	Redelivered   int64 // of which were redelivered work
	Duplicates    int64 // results the stream already had (dropped there)
	HarnessErrors int64
	Large         int64 // results whose observation went through the object store
}

type agent struct {
	cfg     AgentConfig
	log     *slog.Logger
	st      AgentStats
	busy    atomic.Int64
	harness atomic.Int64 // in a row
	fatal   chan error
	abort   context.CancelFunc // stops the agent after a fatal error
	mu      sync.Mutex
	seen    map[string]bool // signatures this agent minimized or found stored
}

// RunAgent serves work until ctx ends or the target fails too often.
func RunAgent(ctx context.Context, cfg AgentConfig) (*AgentStats, error) {
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
	a := &agent{cfg: cfg, log: cfg.Log.With("agent", cfg.ID), fatal: make(chan error, 1), seen: map[string]bool{}}
	workers := 1
	if pt, ok := cfg.Target.(interface{ Parallel() int }); ok {
		workers = max(1, pt.Parallel())
	}
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

func (a *agent) stats() *AgentStats {
	return &AgentStats{Programs: atomic.LoadInt64(&a.st.Programs), Redelivered: atomic.LoadInt64(&a.st.Redelivered),
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
func (a *agent) consumer(ctx context.Context) (jetstream.Consumer, error) {
	logged := false
	for {
		c, err := a.cfg.Store.JS.Consumer(ctx, WorkStream, AgentConsumer(a.cfg.Kind))
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

func (a *agent) heartbeats(ctx context.Context, workers int) chan struct{} {
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
func (a *agent) serve(ctx context.Context, m jetstream.Msg) {
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
	// Tell JetStream this agent is alive while the program runs, is
	// minimized and its result is stored.
	stop := keepAlive(m)
	defer stop()
	start := time.Now()
	o, runErr := a.cfg.Target.Run(p, agents.Options{Corrupt: w.Corrupt})
	r := &Result{V: WireVersion, Campaign: w.Campaign, CampaignSeed: w.CampaignSeed, Index: w.Index, Seed: w.Seed,
		Agent: a.cfg.ID, Delivered: md.NumDelivered, Target: a.cfg.Target.Name(), Program: w.Program, Observation: o,
		Err: NewRunError(runErr), Started: start, RunNanos: int64(time.Since(start)), TargetArgs: a.cfg.TargetArgs}
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
		r.Minimized = a.minimize(ctx, p, o, runErr, w.Corrupt)
	}
	b, err := a.encode(ctx, r)
	if err != nil {
		a.log.Error("encoding a result", "index", w.Index, "err", err)
		m.NakWithDelay(time.Second)
		return
	}
	for {
		ack, err := a.cfg.Store.JS.Publish(ctx, resultSubject(w.Campaign), b, jetstream.WithMsgID(fmt.Sprintf("%s/%d", w.Campaign, w.Index)))
		if err == nil {
			if ack.Duplicate {
				atomic.AddInt64(&a.st.Duplicates, 1)
			}
			break
		}
		if ctx.Err() != nil {
			return // not acknowledged: redelivered to someone
		}
		a.log.Warn("publishing a result failed; retrying", "index", w.Index, "err", err)
		sleep(ctx, 500*time.Millisecond)
	}
	atomic.AddInt64(&a.st.Programs, 1)
	if md.NumDelivered > 1 {
		atomic.AddInt64(&a.st.Redelivered, 1)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		// The result is stored; the work comes back and its second
		// result is dropped as a duplicate.
		a.log.Warn("acknowledging work", "index", w.Index, "err", err)
	}
}

// encode encodes r; an observation too large for a message goes to the
// object store first.
func (a *agent) encode(ctx context.Context, r *Result) ([]byte, error) {
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
	if _, err := a.cfg.Store.Obs.PutBytes(ctx, name, ob); err != nil {
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

// minimize reduces each failing signature that the findings bucket does
// not hold yet (the coordinator decides what is new; this only saves it a
// target it does not have).
func (a *agent) minimize(ctx context.Context, p *prog.Program, o *obs.Observation, runErr error, corrupt string) []Minimized {
	if a.cfg.MinimizeRuns <= 0 {
		return nil
	}
	v, herr := judge.Judge(p, o, runErr)
	if herr != nil {
		return nil
	}
	var out []Minimized
	for _, is := range v.Issues {
		a.mu.Lock()
		seen := a.seen[is.Signature]
		a.seen[is.Signature] = true
		a.mu.Unlock()
		if seen {
			continue
		}
		if _, err := a.cfg.Store.Findings.Get(ctx, FindingKey(is.Signature)); !errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		f := &campaign.Finding{Issue: is, Program: p, Observation: o}
		campaign.Reduce(a.cfg.Target, f, a.cfg.MinimizeRuns, a.cfg.MinimizeTime, corrupt)
		a.log.Info("minimized", "signature", is.Signature, "ops", len(f.Minimized.Ops), "from", len(p.Ops),
			"reproduced", fmt.Sprintf("%d/%d", f.Reproduced, f.Replays))
		out = append(out, Minimized{Signature: is.Signature, Program: string(f.Minimized.Format()), Observation: f.MinObs,
			Explanation: f.MinIssue.Explanation, Runs: f.MinRuns, Replays: f.Replays, Reproduced: f.Reproduced})
	}
	return out
}
