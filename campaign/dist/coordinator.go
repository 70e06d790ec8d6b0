package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
	"github.com/forkfuzz/forkfuzz/campaign/report"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// CoordinatorConfig describes a distributed campaign.
type CoordinatorConfig struct {
	Store    *Store
	Campaign string // name; a stored campaign of that name is resumed
	Seed     uint64
	Programs int           // 0: no program limit
	Duration time.Duration // 0: no time limit (of this run of the coordinator)
	Target   string        // target kind the agents must run
	Kernel   string        // SHA-256 of the kernel image in the object store (qemu)
	Corrupt  string        // test-only executor corruption
	Weights  gen.Weights
	Workdir  string // finding directories are also written to Workdir/findings
	// Blind: measure kernel coverage (the corpus under
	// Workdir/corpus/KERNEL-ID is still kept) but do not let it guide
	// the programs. Guided otherwise, like forkfuzz run (campaign.Guide).
	Blind bool
	// CoverEvery and CensusEvery are campaign.Config's: one program in
	// CoverEvery collects kernel coverage, one in CensusEvery takes the
	// page census at its forks (0: campaign's defaults).
	CoverEvery, CensusEvery int
	// Queue bounds the programs published and not yet done (default 256).
	Queue int
	// AckWait: how long an agent may hold work without a sign of life.
	AckWait time.Duration
	// Judges is the number of goroutines that judge and store results
	// (default: 2 per CPU, at least 4; storing waits on JetStream).
	Judges  int
	Log     *slog.Logger
	Metrics *Metrics
	// Progress receives a status line every ProgressEvery (nil: none);
	// with ProgressLines, plain lines instead of one line rewritten with
	// a carriage return (for a log file or a CI console).
	Progress      io.Writer
	ProgressLines bool
	ProgressEvery time.Duration

	// judge replaces campaign.Judge (the dispatch benchmark: no judging).
	judge func(*prog.Program, *obs.Observation, error) (*judge.Verdict, error)
}

// State is a campaign's record in the state bucket.
type State struct {
	V        int    `json:"v"`
	Campaign string `json:"campaign"`
	Seed     uint64 `json:"seed"`
	Programs int    `json:"programs"`
	Target   string `json:"target"`
	Kernel   string `json:"kernel,omitempty"`
	Corrupt  string `json:"corrupt,omitempty"`
	Next     int64  `json:"next"` // programs 0..Next-1 are published
	// Fresh: the fresh programs among them (campaign.Guide.Fresh); a
	// state without it (0) had Next.
	Fresh    int64     `json:"fresh,omitempty"`
	Finished bool      `json:"finished"`
	Starts   int       `json:"starts"` // times a coordinator took it up
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
}

// Done is the record of one finished program: exactly one per index.
type Done struct {
	Seed       uint64   `json:"seed"`
	Agent      string   `json:"agent"`
	Delivered  uint64   `json:"delivered"`
	RunNanos   int64    `json:"run_ns"`
	Forks      int      `json:"forks"`
	Signatures []string `json:"signatures,omitempty"`
	New        []string `json:"new,omitempty"` // signatures first seen here
	Harness    string   `json:"harness_error,omitempty"`
}

// Stats summarize a campaign as the coordinator saw it (including what
// earlier coordinators of the same campaign stored).
type Stats struct {
	Done          int64 // programs with a stored result
	Programs      int64 // of which ran (no harness error)
	Forks         int64
	Events        int64 // failing runs
	Findings      int64 // new signatures in this campaign
	HarnessErrors int64
	Redelivered   int64 // stored results whose work was delivered more than once
	Duplicates    int64 // results dropped because the index was already done
	Published     int64
	Resumed       bool
	Elapsed       time.Duration
	Saved         []string // finding directories written by this run
	// Cover is the coverage phrase ("coverage: unavailable (...)" on
	// targets without KCOV); CoverCounts its totals (nil: none).
	Cover       string
	CoverCounts *cover.Counts
	// Abandoned counts programs published but done by no worker when the
	// coordinator stopped waiting for them (its duration over, no result
	// for StallAfter); the campaign is resumable.
	Abandoned int64
}

// NoWorkerWarning: a coordinator with no result this long after its start
// warns that no worker seems to be connected (and how to connect one).
var NoWorkerWarning = time.Minute

// StallAfter: once its duration is over, a coordinator that got no result
// for this long stops waiting for the programs still out (Stats.Abandoned).
var StallAfter = time.Minute

type coord struct {
	cfg   CoordinatorConfig
	s     *Store
	log   *slog.Logger
	judge func(*prog.Program, *obs.Observation, error) (*judge.Verdict, error)
	files *campaign.FindingStore
	// recMu serializes the read-modify-write of finding records and the
	// writing of finding directories (rare: new findings, minimizations).
	recMu sync.Mutex
	// wasFinished: the campaign had finished before this start (a
	// resumed finished campaign does not ask again for minimizations).
	wasFinished bool

	mu         sync.Mutex // protects everything below
	state      State
	saved      time.Time // when state was last saved
	pool       *campaign.Pool
	st         Stats
	done       map[int64]bool          // indices with a Done record (the record decides)
	minPending map[string]bool         // findings (by key) whose minimization is awaited
	firstOf    map[string]findingOwner // findings (by key) known to be stored, and by whom
	wake       chan struct{}
	guide      *campaign.Guide
	every      *campaign.Config // the sampling rules of coverage and census (CoverFor, CensusFor)
}

// RunCoordinator runs (or resumes) a campaign: it publishes work, stores
// results, judges them and keeps the findings, until the program limit is
// done, the duration ends (work already published is waited for), or ctx
// ends (the campaign can then be resumed by a new coordinator).
func RunCoordinator(ctx context.Context, cfg CoordinatorConfig) (*Stats, error) {
	start := time.Now()
	if err := ValidName(cfg.Campaign); err != nil {
		return nil, fmt.Errorf("dist: campaign: %w", err)
	}
	if err := ValidName(cfg.Target); err != nil {
		return nil, fmt.Errorf("dist: target: %w", err)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 256
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = time.Second
	}
	if cfg.Judges <= 0 {
		cfg.Judges = max(4, 2*runtime.GOMAXPROCS(0))
	}
	c := &coord{cfg: cfg, s: cfg.Store, log: cfg.Log.With("campaign", cfg.Campaign), judge: cfg.judge,
		files: &campaign.FindingStore{Dir: cfg.Workdir, Pages: report.Files}, pool: campaign.NewPool(), done: map[int64]bool{},
		minPending: map[string]bool{}, firstOf: map[string]findingOwner{}, wake: make(chan struct{}, 1),
		every: &campaign.Config{Blind: cfg.Blind, CoverEvery: cfg.CoverEvery, CensusEvery: cfg.CensusEvery}}
	if c.judge == nil {
		c.judge = judge.Judge
	}
	if err := c.files.Open(); err != nil {
		return nil, err
	}
	if err := c.loadState(ctx); err != nil {
		return nil, err
	}
	// Coverage guidance, as in a local campaign; programs then also
	// depend on what earlier ones covered (each still carries its text).
	kid := ""
	if len(c.state.Kernel) >= 16 {
		kid = c.state.Kernel[:16] // cover.KernelID of the same image
	}
	c.guide = campaign.NewGuide(campaign.Config{Seed: c.state.Seed, Weights: cfg.Weights, Workdir: cfg.Workdir,
		Blind: cfg.Blind, CoverEvery: cfg.CoverEvery, Log: slogWriter{c.log}}, kid)
	c.guide.SetFresh(c.state.Fresh)
	if _, err := EnsureWorkerConsumer(ctx, c.s.JS, cfg.Target, cfg.AckWait); err != nil {
		return nil, err
	}
	if err := c.restore(ctx); err != nil {
		return nil, err
	}
	// Results a dead coordinator had pulled but not acknowledged would
	// wait out the ack wait; only one coordinator runs a campaign, so
	// the consumer is made anew and gets every unacknowledged result at
	// once (acknowledged ones are gone from the work-queue stream).
	rname := "coordinator-" + cfg.Campaign
	if err := c.s.JS.DeleteConsumer(ctx, ResultStream, rname); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("dist: result consumer: %w", err)
	}
	rc, err := c.s.JS.CreateOrUpdateConsumer(ctx, ResultStream, jetstream.ConsumerConfig{
		Durable: rname, FilterSubject: resultSubject(cfg.Campaign),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 4096,
	})
	if err != nil {
		return nil, fmt.Errorf("dist: result consumer: %w", err)
	}
	mname := rname + "-min"
	if err := c.s.JS.DeleteConsumer(ctx, ResultStream, mname); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("dist: minimize result consumer: %w", err)
	}
	mc, err := c.s.JS.CreateOrUpdateConsumer(ctx, ResultStream, jetstream.ConsumerConfig{
		Durable: mname, FilterSubject: minimizedSubject(cfg.Campaign),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("dist: minimize result consumer: %w", err)
	}
	if cfg.Metrics != nil {
		stop := cfg.Metrics.watchAgents(ctx, c.s.Agents)
		defer stop()
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	rerr := make(chan error, 1)
	go func() { rerr <- c.consumeResults(rctx, rc, mc) }()
	stopProgress := c.progress(start)
	defer stopProgress()

	err = c.produce(ctx, start)
	rcancel()
	if e := <-rerr; err == nil && e != nil {
		err = e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Elapsed = time.Since(start)
	c.st.Cover, c.st.CoverCounts = c.guide.Status(), c.guide.Close()
	st := c.st
	return &st, err
}

func (c *coord) loadState(ctx context.Context) error {
	cfg := c.cfg
	e, err := c.s.State.Get(ctx, cfg.Campaign)
	switch {
	case err == nil:
		if err := json.Unmarshal(e.Value(), &c.state); err != nil {
			return fmt.Errorf("dist: campaign %s: stored state: %w", cfg.Campaign, err)
		}
		if cfg.Seed != 0 && cfg.Seed != c.state.Seed {
			return fmt.Errorf("dist: campaign %s exists with seed %d, not %d (resume it without --seed, or name a new campaign)", cfg.Campaign, c.state.Seed, cfg.Seed)
		}
		if c.state.Target != cfg.Target {
			return fmt.Errorf("dist: campaign %s runs on target %s, not %s", cfg.Campaign, c.state.Target, cfg.Target)
		}
		if cfg.Programs > 0 {
			c.state.Programs = cfg.Programs
		}
		c.st.Resumed = true
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if cfg.Seed == 0 {
			return errors.New("dist: a new campaign needs a seed")
		}
		c.state = State{V: WireVersion, Campaign: cfg.Campaign, Seed: cfg.Seed, Programs: cfg.Programs,
			Target: cfg.Target, Kernel: cfg.Kernel, Corrupt: cfg.Corrupt, Started: time.Now()}
	default:
		return fmt.Errorf("dist: campaign %s: %w", cfg.Campaign, err)
	}
	if c.state.Fresh == 0 {
		c.state.Fresh = c.state.Next // a state from before Fresh was kept
	}
	c.wasFinished = c.state.Finished
	c.state.Finished = false
	c.state.Starts++
	if cfg.Kernel != "" {
		c.state.Kernel = cfg.Kernel
	}
	if err := c.saveState(ctx); err != nil {
		return err
	}
	c.log.Info("campaign", "seed", c.state.Seed, "resumed", c.st.Resumed, "published", c.state.Next,
		"target", c.state.Target, "programs", c.state.Programs,
		"replay", fmt.Sprintf("fresh program k uses campaign.ProgramSeed(%d, k); every program's seed is in its work and result", c.state.Seed))
	return nil
}

func (c *coord) saveState(ctx context.Context) error {
	c.state.Updated = time.Now()
	c.saved = c.state.Updated
	b, _ := json.Marshal(c.state)
	if _, err := c.s.State.Put(ctx, c.cfg.Campaign, b); err != nil {
		return fmt.Errorf("dist: campaign %s: saving state: %w", c.cfg.Campaign, err)
	}
	return nil
}

// restore reloads what earlier coordinators stored: the counts from the
// done records, the mutation pool, finding directories that a crash kept
// from being written, and minimizations still awaited (asked for again).
func (c *coord) restore(ctx context.Context) error {
	cid := c.cfg.Campaign
	err := watchAll(ctx, c.s.Done, cid+".>", func(key string, v []byte) error {
		var d Done
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("done record %s: %w", key, err)
		}
		i, err := strconv.ParseInt(strings.TrimPrefix(key, cid+"."), 10, 64)
		if err != nil {
			return fmt.Errorf("done key %s: %w", key, err)
		}
		c.done[i] = true
		c.count(&d)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dist: restoring campaign %s: %w", cid, err)
	}
	err = watchAll(ctx, c.s.Corpus, cid+".>", func(key string, v []byte) error {
		slot, err := strconv.Atoi(strings.TrimPrefix(key, cid+"."))
		if err != nil {
			return fmt.Errorf("corpus key %s: %w", key, err)
		}
		p, err := prog.Parse(v)
		if err != nil {
			return fmt.Errorf("corpus %s: %w", key, err)
		}
		c.pool.Set(slot, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dist: restoring the corpus of %s: %w", cid, err)
	}
	return watchAll(ctx, c.s.Findings, ">", func(key string, v []byte) error {
		var m FindingMeta
		if json.Unmarshal(v, &m) != nil || m.Campaign != cid {
			return nil
		}
		return c.restoreFinding(ctx, key)
	})
}

// count adds a done record to the statistics (with c.mu held or before
// any goroutine runs).
func (c *coord) count(d *Done) {
	c.st.Done++
	if d.Delivered > 1 {
		c.st.Redelivered++
	}
	if d.Harness != "" {
		c.st.HarnessErrors++
		return
	}
	c.st.Programs++
	c.st.Forks += int64(d.Forks)
	if len(d.Signatures) > 0 {
		c.st.Events++
	}
	c.st.Findings += int64(len(d.New))
}

// watchAll calls fn for every current value of the keys matching filter.
func watchAll(ctx context.Context, kv jetstream.KeyValue, filter string, fn func(key string, v []byte) error) error {
	w, err := kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watcher closed")
			}
			if e == nil { // every current value was delivered
				return nil
			}
			if err := fn(e.Key(), e.Value()); err != nil {
				return err
			}
		}
	}
}

func (c *coord) limitReached(deadline time.Time) bool {
	return (c.state.Programs > 0 && c.state.Next >= int64(c.state.Programs)) ||
		(!deadline.IsZero() && time.Now().After(deadline))
}

// produce publishes work while fewer than Queue programs are outstanding,
// and returns when every published program is done after the limit and
// every new finding's minimization is stored.
func (c *coord) produce(ctx context.Context, start time.Time) error {
	var deadline time.Time
	if c.cfg.Duration > 0 {
		deadline = start.Add(c.cfg.Duration)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	warned := false
	lastDone, lastProgress := int64(-1), time.Now()
	for {
		if ctx.Err() != nil {
			// Resumable: the state says what was published.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c.mu.Lock()
			c.saveState(sctx)
			c.mu.Unlock()
			cancel()
			return nil
		}
		c.mu.Lock()
		limit := c.limitReached(deadline)
		outstanding := c.state.Next - c.st.Done
		if c.st.Done != lastDone {
			lastDone, lastProgress = c.st.Done, time.Now()
		}
		if !warned && c.st.Done == 0 && time.Since(start) > NoWorkerWarning {
			warned = true
			c.log.Warn(fmt.Sprintf("no worker has returned a result in %v: is one connected (forkfuzz worker with this coordinator's URL, --target %s and its token or credentials)?", NoWorkerWarning, c.state.Target))
			if c.cfg.Progress != nil {
				fmt.Fprintf(c.cfg.Progress, "coordinator: warning: no worker has returned a result in %v; is one connected with --target %s and the token?\n", NoWorkerWarning, c.state.Target)
			}
		}
		if limit && outstanding > 0 && !deadline.IsZero() && time.Since(lastProgress) > StallAfter {
			// The duration is over and no worker answers: stop waiting
			// (the state keeps the published programs for a resume).
			c.st.Abandoned = outstanding
			err := c.saveState(ctx)
			c.mu.Unlock()
			c.log.Warn(fmt.Sprintf("duration over and no result for %v: %d published programs left undone (resumable)", StallAfter, outstanding))
			return err
		}
		if limit && outstanding <= 0 && len(c.minPending) == 0 {
			c.state.Finished = true
			err := c.saveState(ctx)
			c.mu.Unlock()
			if n, cerr := c.clearWork(ctx); cerr != nil {
				c.log.Warn("removing the campaign's leftover work", "err", cerr)
			} else if n > 0 {
				c.log.Info("removed leftover work (answers already stored)", "messages", n)
			}
			c.log.Info("campaign finished", "done", c.st.Done, "findings", c.st.Findings)
			return err
		}
		var batch []*Work
		for !c.limitReached(deadline) && c.state.Next+int64(len(batch))-c.st.Done < int64(c.cfg.Queue) && len(batch) < 512 {
			i := c.state.Next + int64(len(batch))
			p, _, org := c.guide.NewProgram(i, c.pool)
			cover := c.every.CoverFor(i, org)
			batch = append(batch, &Work{V: WireVersion, Campaign: c.cfg.Campaign, CampaignSeed: c.state.Seed, Index: i,
				Seed: org.Seed, Drawn: org.Note, Program: string(p.Format()), Target: c.state.Target,
				Kernel: c.state.Kernel, Corrupt: c.state.Corrupt,
				// kallsyms (about 1 MB) until the corpus has them: every
				// 64th program asks, not every one in flight.
				Symbols: cover && i%64 == 0 && c.guide.WantSymbols(),
				NoCover: !cover, NoForkPages: !c.every.CensusFor(i, org)})
			if c.state.Programs > 0 && i+1 >= int64(c.state.Programs) {
				break
			}
		}
		c.mu.Unlock()
		if len(batch) > 0 {
			if err := c.publish(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				c.log.Warn("publishing work failed; retrying", "err", err)
				time.Sleep(500 * time.Millisecond)
				continue
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-c.wake:
		case <-tick.C:
		}
	}
}

// slogWriter turns the guide's log lines into the coordinator's.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(b []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(b)))
	return len(b), nil
}

// clearWork deletes the campaign's work still in the queue once every
// answer is stored: work an agent answered but died before acknowledging
// would otherwise come back after the ack wait, to be run for nothing.
func (c *coord) clearWork(ctx context.Context) (int, error) {
	info, err := c.s.Work.Info(ctx)
	if err != nil {
		return 0, err
	}
	prefix := c.cfg.Campaign + "/"
	n := 0
	// Next-by-subject lookups visit only the messages that exist, however
	// sparse the queue's sequence range is.
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; {
		m, err := c.s.Work.GetMsg(ctx, seq, jetstream.WithGetMsgSubject("ffz.work.>"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("work message at or after %d: %w", seq, err)
		}
		seq = m.Sequence + 1
		if !strings.HasPrefix(m.Header.Get(jetstream.MsgIDHeader), prefix) {
			continue
		}
		if err := c.s.Work.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("work message %d: %w", m.Sequence, err)
		}
		n++
	}
	return n, nil
}

// publish sends a batch and then records it as published. A coordinator
// that dies in between republishes the batch on restart with the same
// message IDs, which the work stream drops as duplicates.
func (c *coord) publish(ctx context.Context, batch []*Work) error {
	futs := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, w := range batch {
		b, _ := json.Marshal(w)
		c.log.Debug("program", "index", w.Index, "seed", w.Seed)
		f, err := c.s.JS.PublishAsync(workSubject(w.Target), b, jetstream.WithMsgID(fmt.Sprintf("%s/%d", w.Campaign, w.Index)))
		if err != nil {
			return fmt.Errorf("work %d: %w", w.Index, err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("no acknowledgement from JetStream in 30s")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Next = batch[len(batch)-1].Index + 1
	c.state.Fresh = c.guide.Fresh()
	c.st.Published += int64(len(batch))
	if m := c.cfg.Metrics; m != nil {
		m.Published.Add(float64(len(batch)))
	}
	// A stale Next costs nothing but republishing: the work stream drops
	// message IDs it saw within DedupWindow, and the Done records drop
	// anything older. So the state is saved at most every 200ms.
	if time.Since(c.saved) < 200*time.Millisecond {
		return nil
	}
	return c.saveState(ctx)
}

// consumeResults pulls results and minimize results and hands them to
// cfg.Judges goroutines, each of which judges and stores one message at a
// time. Storing is idempotent and exactly-once by the KV Creates (findings,
// Done), so messages are handled in any order and concurrently.
func (c *coord) consumeResults(ctx context.Context, rc, mc jetstream.Consumer) error {
	msgs := make(chan jetstream.Msg)
	var pullers, judges sync.WaitGroup
	for _, cons := range []jetstream.Consumer{rc, mc} {
		pullers.Add(1)
		go func() {
			defer pullers.Done()
			c.pull(ctx, cons, msgs)
		}()
	}
	minSubject := minimizedSubject(c.cfg.Campaign)
	for range c.cfg.Judges {
		judges.Add(1)
		go func() {
			defer judges.Done()
			for {
				var m jetstream.Msg
				select {
				case <-ctx.Done():
					return
				case m = <-msgs:
				}
				var err error
				if m.Subject() == minSubject {
					err = c.handleMinimized(ctx, m)
				} else {
					err = c.handle(ctx, m)
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					c.log.Warn("storing a result failed; it will be redelivered", "subject", m.Subject(), "err", err)
					m.NakWithDelay(time.Second)
				}
			}
		}()
	}
	pullers.Wait()
	judges.Wait()
	return nil
}

// pull sends cons's messages to msgs until ctx ends.
func (c *coord) pull(ctx context.Context, cons jetstream.Consumer, msgs chan<- jetstream.Msg) {
	for ctx.Err() == nil {
		it, err := cons.Messages(jetstream.PullMaxMessages(256))
		if err != nil {
			c.log.Warn("result consumer", "err", err)
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		stopIt := context.AfterFunc(ctx, it.Stop)
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					c.log.Warn("result consumer", "err", err)
				}
				break
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				// Not acknowledged: redelivered to the next coordinator.
			}
		}
		stopIt()
		it.Stop()
	}
}

// handle stores one result: it judges it (the only place a result is
// judged), keeps new findings (asking an agent to minimize each), adds the
// program to the pool, records the index as done, and only then
// acknowledges it. Each step is idempotent, so a result redelivered after
// a crash anywhere in between is stored once.
func (c *coord) handle(ctx context.Context, m jetstream.Msg) error {
	r, p, err := DecodeResult(m.Data())
	if err != nil {
		c.log.Error("dropping an undecodable result", "err", err)
		return m.TermWithReason(err.Error())
	}
	key := doneKey(c.cfg.Campaign, r.Index)
	c.mu.Lock()
	seen := c.done[r.Index]
	c.mu.Unlock()
	if seen {
		c.duplicate(r)
		c.dropObservation(ctx, r)
		return m.Ack()
	}
	if r.ObservationRef != "" {
		b, err := c.s.Obs.GetBytes(ctx, r.ObservationRef)
		if err != nil {
			return fmt.Errorf("observation %s: %w", r.ObservationRef, err)
		}
		if r.Observation, err = DecodeObservation(b); err != nil || len(r.Observation.Ops) != len(p.Ops) {
			c.log.Error("dropping a result whose stored observation does not decode", "index", r.Index, "ref", r.ObservationRef, "err", err)
			return m.TermWithReason("bad stored observation")
		}
	}
	d := Done{Seed: r.Seed, Agent: r.Agent, Delivered: r.Delivered, RunNanos: r.RunNanos, Forks: p.NumForks()}
	v, herr := c.judge(p, r.Observation, r.Err.Err())
	if herr != nil {
		d.Harness = herr.Error()
		c.log.Warn("harness error", "index", r.Index, "seed", r.Seed, "agent", r.Agent, "err", herr)
	} else {
		if err := c.addToPool(ctx, r.Index, p, r.Program); err != nil {
			return err
		}
		sigs := map[string]bool{}
		for _, is := range v.Issues {
			if sigs[is.Signature] {
				continue // one program, one finding per signature
			}
			sigs[is.Signature] = true
			d.Signatures = append(d.Signatures, is.Signature)
			isNew, err := c.saveFinding(ctx, r, is)
			if err != nil {
				return err
			}
			if isNew {
				d.New = append(d.New, is.Signature)
			}
		}
	}
	b, _ := json.Marshal(d)
	if _, err := c.s.Done.Create(ctx, key, b); errors.Is(err, jetstream.ErrKeyExists) {
		c.duplicate(r)
		c.dropObservation(ctx, r)
		return m.Ack()
	} else if err != nil {
		return fmt.Errorf("done record %s: %w", key, err)
	}
	c.dropObservation(ctx, r)
	c.mu.Lock()
	c.done[r.Index] = true
	c.count(&d)
	if herr == nil {
		c.guide.Record(r.Index, p, r.Observation, time.Duration(r.RunNanos), len(d.New))
	} else {
		c.guide.Forget(r.Index)
	}
	c.mu.Unlock()
	if mt := c.cfg.Metrics; mt != nil {
		mt.observe(&d)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if err := m.Ack(); err != nil {
		// Stored already: a redelivery is dropped as a duplicate.
		c.log.Warn("acknowledging a stored result", "index", r.Index, "err", err)
	}
	return nil
}

// addToPool puts a program that ran into the pool and its slot in the
// corpus bucket. The slot's KV write is published under c.mu, so writes
// to one slot reach the bucket in the order the pool took them (one
// connection keeps its publishes in order) and the stored corpus matches
// the pool; the acknowledgement is awaited outside the lock.
func (c *coord) addToPool(ctx context.Context, i int64, p *prog.Program, text string) error {
	c.mu.Lock()
	slot := c.pool.Add(i, p)
	f, err := c.s.JS.PublishAsync(corpusSubject(c.cfg.Campaign, slot), []byte(text))
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("corpus slot %d: %w", slot, err)
	}
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return fmt.Errorf("corpus slot %d: %w", slot, err)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return fmt.Errorf("corpus slot %d: no acknowledgement from JetStream in 30s", slot)
	}
}

// dropObservation deletes the stored observation of a stored or duplicate
// result (best effort: a leftover costs only space).
func (c *coord) dropObservation(ctx context.Context, r *Result) {
	if r.ObservationRef == "" {
		return
	}
	if err := c.s.Obs.Delete(ctx, r.ObservationRef); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		c.log.Warn("deleting a stored observation", "ref", r.ObservationRef, "err", err)
	}
}

func (c *coord) duplicate(r *Result) {
	c.mu.Lock()
	c.st.Duplicates++
	c.mu.Unlock()
	if mt := c.cfg.Metrics; mt != nil {
		mt.Duplicates.Inc()
	}
	c.log.Debug("duplicate result dropped", "index", r.Index, "agent", r.Agent, "delivered", r.Delivered)
}

func (c *coord) progress(start time.Time) func() {
	if c.cfg.Progress == nil {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				if !c.cfg.ProgressLines {
					fmt.Fprintln(c.cfg.Progress)
				}
				return
			case <-t.C:
				c.mu.Lock()
				st, next := c.st, c.state.Next
				c.mu.Unlock()
				el := time.Since(start).Seconds()
				line := fmt.Sprintf("%s  programs %d (%.1f/s)  forks %d (%.1f/s)  queued %d  redelivered %d  findings %d",
					time.Since(start).Round(time.Second), st.Programs, float64(st.Programs)/el, st.Forks, float64(st.Forks)/el,
					next-st.Done, st.Redelivered, st.Findings)
				line += "  " + c.guide.Status()
				if c.cfg.ProgressLines {
					fmt.Fprintf(c.cfg.Progress, "progress: %s\n", line)
				} else {
					fmt.Fprintf(c.cfg.Progress, "\r%s   ", line)
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}
