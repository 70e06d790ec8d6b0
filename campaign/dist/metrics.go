package dist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the coordinator's Prometheus metrics. Rates (programs/s,
// forks/s) are rate() of the counters.
type Metrics struct {
	Reg           *prometheus.Registry
	Programs      prometheus.Counter
	Forks         prometheus.Counter
	Events        prometheus.Counter
	Findings      prometheus.Counter
	HarnessErrors prometheus.Counter
	Redelivered   prometheus.Counter
	Duplicates    prometheus.Counter
	Published     prometheus.Counter
	AgentSeen     *prometheus.GaugeVec // unix time of an agent's last heartbeat
	AgentPrograms *prometheus.GaugeVec
	AgentBusy     *prometheus.GaugeVec
}

// NewMetrics registers the metrics in a fresh registry.
func NewMetrics() *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "forkfuzz", Name: name, Help: help})
	}
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "forkfuzz", Name: name, Help: help}, []string{"agent", "target"})
	}
	m := &Metrics{
		Reg:           prometheus.NewRegistry(),
		Programs:      c("programs_total", "Programs whose results were stored (harness errors excluded)."),
		Forks:         c("forks_total", "Forks in those programs."),
		Events:        c("failing_runs_total", "Programs that showed at least one issue."),
		Findings:      c("findings_total", "New unique findings (signatures seen for the first time)."),
		HarnessErrors: c("harness_errors_total", "Programs that a target could not run."),
		Redelivered:   c("redelivered_total", "Stored results whose work was delivered more than once."),
		Duplicates:    c("duplicate_results_total", "Results dropped because their program was already done."),
		Published:     c("published_total", "Programs published to the work queue."),
		AgentSeen:     g("agent_last_heartbeat_seconds", "Unix time of the agent's last heartbeat."),
		AgentPrograms: g("agent_programs", "Programs the agent has run since it started."),
		AgentBusy:     g("agent_busy_workers", "Programs the agent is running now."),
	}
	m.Reg.MustRegister(m.Programs, m.Forks, m.Events, m.Findings, m.HarnessErrors, m.Redelivered, m.Duplicates,
		m.Published, m.AgentSeen, m.AgentPrograms, m.AgentBusy,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) observe(d *Done) {
	if d.Delivered > 1 {
		m.Redelivered.Inc()
	}
	if d.Harness != "" {
		m.HarnessErrors.Inc()
		return
	}
	m.Programs.Inc()
	m.Forks.Add(float64(d.Forks))
	if len(d.Signatures) > 0 {
		m.Events.Inc()
	}
	m.Findings.Add(float64(len(d.New)))
}

// watchAgents follows the agents bucket into the per-agent gauges.
func (m *Metrics) watchAgents(ctx context.Context, kv jetstream.KeyValue) func() {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return func() {}
	}
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			h, err := DecodeHeartbeat(e.Value())
			if err != nil {
				continue
			}
			m.AgentSeen.WithLabelValues(h.Agent, h.Target).Set(float64(h.Time.Unix()))
			m.AgentPrograms.WithLabelValues(h.Agent, h.Target).Set(float64(h.Programs))
			m.AgentBusy.WithLabelValues(h.Agent, h.Target).Set(float64(h.Busy))
		}
	}()
	return func() { w.Stop() }
}

// Serve serves the registry on addr (/metrics) until ctx ends, and returns
// the address it listens on. An address it cannot bind is an error here; a
// server that fails later is logged on log (nil: discarded) and reported
// on the returned channel, which is closed when the server stops.
func (m *Metrics) Serve(ctx context.Context, addr string, log *slog.Logger) (string, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		defer stop()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			err = fmt.Errorf("metrics server on %s: %w", ln.Addr(), err)
			if log != nil {
				log.Error("metrics server stopped", "err", err)
			}
			errc <- err
		}
	}()
	return ln.Addr().String(), errc, nil
}
