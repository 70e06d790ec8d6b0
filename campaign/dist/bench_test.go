package dist

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// noopTarget does no work: every program "runs" instantly and yields an
// empty observation of the right shape.
type noopTarget struct{}

func (noopTarget) Name() string { return "noop" }
func (noopTarget) Close() error { return nil }
func (noopTarget) Run(p *prog.Program, _ agents.Options) (*obs.Observation, error) {
	return &obs.Observation{Version: obs.Version, Ops: make([]obs.OpResult, len(p.Ops))}, nil
}

func noJudge(*prog.Program, *obs.Observation, error) (*judge.Verdict, error) {
	return &judge.Verdict{}, nil
}

// expectedTarget answers every program with the model's expected
// observation: a correct kernel at no kernel cost, so the real judge
// compares every page of every view (noopTarget's empty observations fail
// at the first operation and cost the judge next to nothing).
type expectedTarget struct{ noopTarget }

func (expectedTarget) Run(p *prog.Program, _ agents.Options) (*obs.Observation, error) {
	return checker.Expected(p), nil
}

// BenchmarkDispatch measures the coordinator's dispatch capacity: programs
// per second through JetStream (generate, publish, pull, publish the
// result, judge it, store it exactly once, acknowledge) with agents that
// do no work. Sub-benchmarks vary the number of agents and the queue
// depth, and run with the coordinator's real judge (judge=on) and without
// (judge=off). target=noop answers with empty observations (the judge
// rejects them at once: this is dispatch capacity); target=expected
// answers with the model's observation, which the judge compares in full
// (it is computed on the agents, which on one machine share the CPUs with
// the coordinator).
func BenchmarkDispatch(b *testing.B) {
	for _, c := range []struct {
		target string
		agents int
		queue  int
	}{{"noop", 4, 256}, {"noop", 16, 1024}, {"expected", 4, 256}} {
		for _, judged := range []bool{false, true} {
			name := fmt.Sprintf("target=%s/agents=%d/queue=%d/judge=%s", c.target, c.agents, c.queue, map[bool]string{false: "off", true: "on"}[judged])
			b.Run(name, func(b *testing.B) {
				var tg agents.Target = noopTarget{}
				if c.target == "expected" {
					tg = expectedTarget{}
				}
				var j func(*prog.Program, *obs.Observation, error) (*judge.Verdict, error) = noJudge
				if judged {
					j = judge.Judge
				}
				benchDispatch(b, tg, c.agents, c.queue, j)
			})
		}
	}
}

func benchDispatch(b *testing.B, tg agents.Target, nagents, queue int, j func(*prog.Program, *obs.Observation, error) (*judge.Verdict, error)) {
	srv, st := testConnected(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for k := 0; k < nagents; k++ {
		anc, err := nats.Connect(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer anc.Close()
		ast := testStore(b, anc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			RunWorker(ctx, WorkerConfig{Store: ast, ID: fmt.Sprintf("a%d", k), Kind: "bench", Target: tg})
		}()
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	cs, err := RunCoordinator(ctx, CoordinatorConfig{Store: st, Workdir: b.TempDir(), Campaign: "bench", Seed: 1, Programs: b.N, Target: "bench",
		Weights: gen.DefaultWeights(), Queue: queue, judge: j})
	el, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	cancel()
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if cs.Done != int64(b.N) {
		b.Fatalf("%d done of %d", cs.Done, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "programs/s")
	// CPU time of the whole process (server, coordinator and agents): on
	// a shared machine a steadier measure than wall time.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/program")
	b.ReportMetric(float64(cs.Events)/float64(b.N), "failing/program")
	b.ReportMetric(float64(cs.Findings), "findings")
}

// BenchmarkDispatchBaseline is the same traffic without JetStream: the
// coordinator generates each program and sends it as a core NATS request
// to a queue group of agents that answer at once with the result's
// payload; the coordinator decodes it. Nothing is stored, acknowledged or
// deduplicated. Requests are pipelined with the same depth as the queue.
func BenchmarkDispatchBaseline(b *testing.B) {
	const agents, depth = 4, 256
	srv := testServer(b, Security{})
	var conns []*nats.Conn
	for k := 0; k < agents; k++ {
		anc, err := nats.Connect(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer anc.Close()
		conns = append(conns, anc)
		anc.QueueSubscribe("base.work", "agents", func(m *nats.Msg) {
			w, p, err := DecodeWork(m.Data)
			if err != nil {
				b.Error(err)
				return
			}
			o, _ := noopTarget{}.Run(p, noOpts)
			r, _ := EncodeResult(&Result{V: WireVersion, Campaign: w.Campaign, Index: w.Index, Seed: w.Seed, Agent: "a",
				Delivered: 1, Target: "noop", Program: w.Program, Observation: o, Started: time.Now()})
			m.Respond(r)
		})
		anc.Flush()
	}
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	pool := campaign.NewPool()
	w := gen.DefaultWeights()
	sem := make(chan struct{}, depth)
	var mu sync.Mutex
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		mu.Lock()
		p := campaign.NewProgram(1, int64(i), pool.Progs, w)
		mu.Unlock()
		data, _ := json.Marshal(Work{V: WireVersion, Campaign: "base", CampaignSeed: 1, Index: int64(i),
			Seed: campaign.ProgramSeed(1, int64(i)), Program: string(p.Format()), Target: "noop"})
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			m, err := nc.Request("base.work", data, 10*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			r, q, err := DecodeResult(m.Data)
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			pool.Add(r.Index, q)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "programs/s")
}

var noOpts agents.Options

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
