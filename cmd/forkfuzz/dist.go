package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/dist"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/kernel"
)

func init() {
	commands = append(commands,
		command{name: "coordinator", args: "[flags]", help: "run a distributed campaign: publish work to workers over NATS JetStream, keep corpus and findings", run: cmdCoordinator},
		command{name: "worker", args: "--coordinator URL", help: "run programs for a coordinator on this machine's targets", run: cmdWorker},
		// "agent" is the worker's former name, kept so scripts go on working.
		command{name: "agent", args: "--coordinator URL", help: "the former name of worker", run: cmdWorker, hidden: true},
		command{name: "status", args: "--coordinator URL", help: "print distributed campaigns, workers and findings at a glance", run: cmdStatus},
	)
}

// stringList is a repeatable, comma-separated flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// connFlags registers the connection and security flags; the result
// merges them over --config (flags win).
func connFlags(fs *flag.FlagSet, server bool) func() (*dist.Config, error) {
	config := fs.String("config", "", "configuration file (key = value lines: token, nkey-seed, nkey-user, tls-cert, tls-key, tls-ca, listen, coordinator, store-dir, metrics-addr)")
	token := fs.String("token", "", "authentication token (default $FORKFUZZ_TOKEN)")
	tlsCA := fs.String("tls-ca", "", "CA certificate (PEM) that signed the coordinator's certificate")
	var seed, tlsCert, tlsKey *string
	var users stringList
	var metrics *string
	if server {
		metrics = fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9464)")
		fs.Var(&users, "nkey-user", "NKey public key (U...) allowed to connect; repeatable or comma-separated")
		tlsCert = fs.String("tls-cert", "", "TLS certificate (PEM) of the embedded server")
		tlsKey = fs.String("tls-key", "", "TLS private key (PEM) of the embedded server")
	} else {
		seed = fs.String("nkey-seed", "", "file holding this client's NKey seed (SU...)")
	}
	var coordinator *string
	if server {
		coordinator = fs.String("nats", "", "use this external NATS cluster (with JetStream) instead of the embedded server")
	} else {
		coordinator = fs.String("coordinator", "", "URL of the coordinator's NATS server (nats://host:4222, tls://host:4222)")
	}
	return func() (*dist.Config, error) {
		c := &dist.Config{}
		if *config != "" {
			var err error
			if c, err = dist.ReadConfig(*config); err != nil {
				return nil, err
			}
		}
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&c.Token, os.Getenv("FORKFUZZ_TOKEN"))
		set(&c.Token, *token)
		set(&c.TLSCA, *tlsCA)
		set(&c.Coordinator, *coordinator)
		if server {
			set(&c.MetricsAddr, *metrics)
			set(&c.TLSCert, *tlsCert)
			set(&c.TLSKey, *tlsKey)
			c.NKeyUsers = append(c.NKeyUsers, users...)
		} else {
			set(&c.NKeySeed, *seed)
		}
		if err := c.Validate(); err != nil {
			return nil, flagError(err, distFlag)
		}
		return c, nil
	}
}

// distFlag names the flag of each dist.Config field a flag sets.
var distFlag = map[string]string{"Token": "token", "NKeySeed": "nkey-seed", "NKeyUsers": "nkey-user", "TLSCert": "tls-cert",
	"TLSKey": "tls-key", "TLSCA": "tls-ca", "MetricsAddr": "metrics-addr"}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// coordinatorOptions are the flags of forkfuzz coordinator.
type coordinatorOptions struct {
	fs                                      *flag.FlagSet
	conn                                    func() (*dist.Config, error)
	listen, storeDir, name, profile, target string
	kernelImage, workdir, forkImpl, corrupt string
	logLevel, httpAddr                      string
	insecure, blind, guided, quiet          bool
	seed                                    uint64
	programs, queue, judges, coverEvery     int
	duration, ackWait                       time.Duration
}

func cmdCoordinator(args []string, stdout, stderr io.Writer) int {
	o := coordinatorFlags(stderr)
	if err := parseArgs(o.fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "forkfuzz coordinator:", err); return exitError }
	if err := o.check(); err != nil {
		return fail(err)
	}
	cfg, err := o.conn()
	if err != nil {
		return fail(err)
	}
	log, err := newLogger(stderr, o.logLevel)
	if err != nil {
		return fail(err)
	}
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if o.storeDir != "" {
		cfg.StoreDir = o.storeDir
	}
	if cfg.StoreDir == "" {
		cfg.StoreDir = filepath.Join(o.workdir, "jetstream")
	}
	// The coordinator writes finding directories as a campaign does: one
	// user of a workdir at a time.
	unlock, err := campaign.LockWorkdir(o.workdir)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	ctx, stop := signalContext()
	defer stop()
	nc, closeServer, err := o.connect(ctx, cfg, log, stdout)
	if err != nil {
		return fail(err)
	}
	defer closeServer()
	defer nc.Close()
	ccfg, err := o.coordinatorConfig(ctx, nc, cfg, log, stderr)
	if err != nil {
		return fail(err)
	}
	cs, err := dist.RunCoordinator(ctx, ccfg)
	if err != nil {
		return fail(err)
	}
	printDistSummary(stdout, cs, o.name)
	if ctx.Err() != nil {
		fmt.Fprintf(stdout, "interrupted: run the coordinator again with --campaign %s to resume\n", o.name)
	}
	if cs.Abandoned > 0 {
		fmt.Fprintf(stdout, "abandoned: %d published programs done by no worker (run the coordinator again with --campaign %s to resume)\n", cs.Abandoned, o.name)
	}
	if cs.Findings > 0 || cs.Events > 0 {
		return exitFindings
	}
	if cs.Programs == 0 {
		return fail(fmt.Errorf("no program ran (%d published, %d harness errors): nothing was tested; is a worker connected?", cs.Published, cs.HarnessErrors))
	}
	return exitClean
}

// coordinatorFlags declares the flags of forkfuzz coordinator.
func coordinatorFlags(stderr io.Writer) *coordinatorOptions {
	o := &coordinatorOptions{fs: newFlags("coordinator", stderr)}
	fs := o.fs
	o.conn = connFlags(fs, true)
	fs.StringVar(&o.listen, "listen", "", "address of the embedded NATS server (default "+dist.DefaultListen+"; beyond loopback needs --token or --nkey-user)")
	fs.StringVar(&o.storeDir, "store-dir", "", "JetStream storage of the embedded server (default WORKDIR/jetstream)")
	fs.BoolVar(&o.insecure, "insecure", false, "allow listening beyond the loopback without authentication")
	fs.StringVar(&o.name, "campaign", "default", "campaign name; a stored campaign of that name is resumed")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of a new campaign (0: random, printed)")
	fs.StringVar(&o.profile, "profile", "default", "generator weights: "+strings.Join(gen.ProfileNames(), ", "))
	fs.IntVar(&o.programs, "programs", 0, "stop after this many programs in all (0: no limit)")
	fs.DurationVar(&o.duration, "duration", 0, "stop publishing after this long, then wait for the published work (0: no limit)")
	fs.StringVar(&o.target, "target", "native", "target kind the agents run: native, qemu or sim")
	fs.StringVar(&o.kernelImage, "kernel-image", "", "qemu: publish this kernel image to the object store; agents fetch it by hash")
	fs.IntVar(&o.queue, "queue", 256, "programs published and not yet done, at most")
	fs.IntVar(&o.judges, "judges", 0, "goroutines that judge and store results (0: 2 per CPU, at least 4)")
	fs.DurationVar(&o.ackWait, "ack-wait", 30*time.Second, "an agent silent this long loses its work to another agent")
	fs.StringVar(&o.workdir, "workdir", "workdir", "finding directories are written here too")
	fs.BoolVar(&o.blind, "blind", false, "the default: keep the coverage corpus (WORKDIR/corpus/KERNEL-ID: KCOV edges, memory states) but do not let it guide the programs")
	fs.BoolVar(&o.guided, "guided", false, "let the coverage corpus guide the programs (blind by default: docs/coverage.md)")
	fs.IntVar(&o.coverEvery, "cover-every", 0, fmt.Sprintf("collect kernel coverage (KCOV) for one program in N (default: one fresh program in %d and every corpus mutation when --guided, one in %d when blind)", campaign.DefaultGuidedCoverEvery, campaign.DefaultBlindCoverEvery))
	fs.StringVar(&o.forkImpl, "fork-impl", "", "the fork implementation the agents run (their --fork-impl): a deferring one keeps generated programs' regions at the top of the address space, as forkfuzz run does")
	fs.StringVar(&o.corrupt, "corrupt", "", "TEST ONLY: make the executors falsify observations")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug (every program's seed), info, warn, error")
	fs.BoolVar(&o.quiet, "q", false, "no progress line")
	fs.StringVar(&o.httpAddr, "http", "", "serve the live campaign page (rates, findings, agents; read-only, no authentication) on this address, e.g. 127.0.0.1:8080")
	positive(fs, "queue", "ack-wait")
	return o
}

// check rejects a target kind, fork implementation or corruption no
// worker could run.
func (o *coordinatorOptions) check() error {
	if o.blind && o.guided {
		return errors.New("--guided: a campaign is blind (the default, --blind) or guided, not both")
	}
	if o.coverEvery < 0 {
		return fmt.Errorf("--cover-every %d: want a number >= 0", o.coverEvery)
	}
	if _, ok := targetKinds[o.target]; !ok {
		var kinds []string
		for k := range targetKinds {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		return fmt.Errorf("--target %q: want one of %s (no worker could run it: the coordinator would wait for ever)", o.target, strings.Join(kinds, ", "))
	}
	if o.forkImpl != "" && !slices.Contains(executor.ForkImplNames(), o.forkImpl) {
		return fmt.Errorf("--fork-impl %q: want one of %s", o.forkImpl, strings.Join(executor.ForkImplNames(), ", "))
	}
	return checkCorrupt(o.target, o.corrupt)
}

// connect connects to the external NATS cluster cfg names, or starts the
// embedded server (closeServer shuts it down) and prints how workers
// connect to it.
func (o *coordinatorOptions) connect(ctx context.Context, cfg *dist.Config, log *slog.Logger, stdout io.Writer) (nc *nats.Conn, closeServer func(), err error) {
	if cfg.Coordinator != "" {
		// An external NATS cluster: no embedded server.
		nc, err = dist.Dial(ctx, cfg.Coordinator, "forkfuzz-coordinator", cfg.Security)
		return nc, func() {}, err
	}
	srv, err := dist.StartServer(dist.ServerConfig{Listen: cfg.Listen, StoreDir: cfg.StoreDir, Security: cfg.Security, Insecure: o.insecure})
	if err != nil {
		return nil, nil, err
	}
	closeServer = func() {
		if !srv.ShutdownWithin(10 * time.Second) {
			log.Warn("the embedded NATS server did not stop within 10s; exiting anyway")
		}
	}
	log.Info("NATS server with JetStream", "url", srv.URL, "store", cfg.StoreDir)
	hint := fmt.Sprintf("forkfuzz worker --coordinator %s --target %s", srv.URL, o.target)
	switch {
	case cfg.Security.Token != "":
		hint += " --token TOKEN (this coordinator's --token)"
	case len(cfg.Security.NKeyUsers) > 0:
		hint += " --nkey-seed SEED (a seed of one of the coordinator's nkey users)"
	}
	fmt.Fprintf(stdout, "coordinator: workers connect with: %s\n", hint)
	if nc, err = srv.Connect("forkfuzz-coordinator"); err != nil {
		closeServer()
		return nil, nil, err
	}
	return nc, closeServer, nil
}

// coordinatorConfig opens the store on nc, starts the metrics and the
// campaign page, publishes the kernel image and returns the campaign's
// configuration.
func (o *coordinatorOptions) coordinatorConfig(ctx context.Context, nc *nats.Conn, cfg *dist.Config, log *slog.Logger, stderr io.Writer) (dist.CoordinatorConfig, error) {
	var ccfg dist.CoordinatorConfig
	st, err := dist.Open(ctx, nc)
	if err != nil {
		return ccfg, err
	}
	var m *dist.Metrics
	if cfg.MetricsAddr != "" {
		m = dist.NewMetrics()
		addr, _, err := m.Serve(ctx, cfg.MetricsAddr, log)
		if err != nil {
			return ccfg, err
		}
		log.Info("metrics", "url", "http://"+addr+"/metrics")
	}
	if o.httpAddr != "" {
		addr, err := serveLive(ctx, o.httpAddr, st, o.name, o.workdir, 10*time.Second)
		if err != nil {
			return ccfg, err
		}
		log.Info("campaign page", "url", "http://"+addr+"/")
	}
	var kernelHash string
	if o.kernelImage != "" {
		if kernelHash, err = dist.PutKernel(ctx, st, o.kernelImage); err != nil {
			return ccfg, err
		}
		log.Info("kernel image published", "path", o.kernelImage, "sha256", kernelHash)
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	weights, err := gen.Profile(o.profile)
	if err != nil {
		return ccfg, fmt.Errorf("--profile: %w", err)
	}
	var arenaNote string
	if weights, arenaNote = campaign.ArenaWeightsFor(o.forkImpl, weights); arenaNote != "" {
		log.Info(arenaNote)
	}
	ccfg = dist.CoordinatorConfig{Store: st, Campaign: o.name, Seed: o.seed, Programs: o.programs, Duration: o.duration,
		Target: o.target, Kernel: kernelHash, Corrupt: o.corrupt, Weights: weights, Workdir: o.workdir, Blind: !o.guided, CoverEvery: o.coverEvery,
		Queue: o.queue, Judges: o.judges, AckWait: o.ackWait, Log: log, Metrics: m}
	if !o.quiet {
		ccfg.Progress = stderr
		if !isTerminal(stderr) {
			ccfg.ProgressLines, ccfg.ProgressEvery = true, 10*time.Second
		}
	}
	if _, err := st.State.Get(ctx, o.name); err == nil {
		ccfg.Seed = 0 // resume with the stored seed
	}
	return ccfg, nil
}

func printDistSummary(w io.Writer, cs *dist.Stats, name string) {
	// The rate is of programs done (a result stored), not published: an
	// interrupted coordinator with no worker published a queue's worth.
	fmt.Fprintf(w, "summary: campaign %s: %d programs, %d forks in %v (%.1f programs/s this run); %d failing runs, %d unique findings, %d harness errors; %d redelivered, %d duplicate results dropped\n",
		name, cs.Programs, cs.Forks, cs.Elapsed.Round(time.Millisecond), float64(cs.Done)/max(cs.Elapsed.Seconds(), 1e-9),
		cs.Events, cs.Findings, cs.HarnessErrors, cs.Redelivered, cs.Duplicates)
	if cs.Cover != "" {
		fmt.Fprintf(w, "%s\n", cs.Cover)
	}
	for _, d := range cs.Saved {
		fmt.Fprintf(w, "finding: %s\n", d)
	}
}

func cmdWorker(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("worker", stderr)
	conn := connFlags(fs, false)
	sel := targetSetup(fs, "native")
	openTarget := sel.Open
	id := fs.String("id", "", "worker name (default HOST-PID)")
	minRuns := fs.Int("minimize-runs", 300, "target runs to spend minimizing a new finding (0: leave it unminimized)")
	minTime := fs.Duration("minimize-time", 2*time.Minute, "time to spend minimizing a new finding")
	cache := fs.String("cache", kernel.CacheDir(), "where kernel images fetched from the coordinator are kept")
	logLevel := fs.String("log-level", "info", "debug, info, warn, error")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "forkfuzz worker:", err); return exitError }
	cfg, err := conn()
	if err != nil {
		return fail(err)
	}
	if cfg.Coordinator == "" {
		return fail(fmt.Errorf("--coordinator URL is required"))
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return fail(err)
	}
	if *id == "" {
		h, _ := os.Hostname()
		*id = sanitizeName(fmt.Sprintf("%s-%d", h, os.Getpid()))
	}
	kind := fs.Lookup("target").Value.String()
	ctx, stop := signalContext()
	defer stop()
	nc, st, err := dialStore(ctx, cfg, "forkfuzz-agent-"+*id)
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	var kernelHash string
	if kind == "qemu" && fs.Lookup("kernel").Value.String() == "" {
		// The campaign's kernel, fetched once by hash.
		if kernelHash, err = dist.CampaignKernel(ctx, st); err != nil {
			return fail(err)
		}
		if kernelHash != "" {
			path, err := dist.FetchKernel(ctx, st, kernelHash, *cache)
			if err != nil {
				return fail(err)
			}
			log.Info("kernel image from the coordinator", "sha256", kernelHash, "path", path)
			fs.Set("kernel", path)
		}
	}
	t, err := openTarget()
	if err != nil {
		return fail(err)
	}
	defer t.Close()
	log.Info("agent", "id", *id, "coordinator", cfg.Coordinator, "target", t.Name())
	as, err := dist.RunWorker(ctx, dist.WorkerConfig{Store: st, ID: *id, Kind: kind, Target: t, Kernel: kernelHash,
		MinimizeRuns: *minRuns, MinimizeTime: *minTime, Log: log, TargetArgs: sel.ReplayArgs(t), KernelID: sel.Kernel(t)})
	if as != nil {
		fmt.Fprintf(stdout, "agent %s: %d results published (%d redelivered work, %d duplicates dropped by the stream), %d harness errors\n",
			*id, as.Programs, as.Redelivered, as.Duplicates, as.HarnessErrors)
	}
	if err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return exitClean
}

// dialStore connects to the coordinator named in cfg and opens the store.
func dialStore(ctx context.Context, cfg *dist.Config, name string) (*nats.Conn, *dist.Store, error) {
	nc, err := dist.Dial(ctx, cfg.Coordinator, name, cfg.Security)
	if err != nil {
		return nil, nil, err
	}
	st, err := dist.Open(ctx, nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, st, nil
}

func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("status", stderr)
	conn := connFlags(fs, false)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	stale := fs.Duration("stale", 10*time.Second, "an agent silent this long is marked STALE")
	positive(fs, "stale")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "forkfuzz status:", err); return exitError }
	cfg, err := conn()
	if err != nil {
		return fail(err)
	}
	if cfg.Coordinator == "" {
		cfg.Coordinator = dist.DefaultCoordinator
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, st, err := dialStore(ctx, cfg, "forkfuzz-status")
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	s, err := dist.ReadStatus(ctx, st)
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", " ")
		enc.Encode(s)
	} else {
		s.Print(stdout, time.Now(), *stale)
	}
	return exitClean
}

// runDist is `forkfuzz run --dist`: the same campaign through a coordinator
// and one agent in this process, over an embedded NATS server on a
// loopback port with its store in a temporary directory.
func runDist(t agents.Target, kind string, cfg campaign.Config, minRuns int, minTime time.Duration, stdout, stderr io.Writer) int {
	fail := func(err error) int { fmt.Fprintln(stderr, "forkfuzz run:", err); return exitError }
	if cfg.Workdir != "" {
		unlock, err := campaign.LockWorkdir(cfg.Workdir)
		if err != nil {
			return fail(err)
		}
		defer unlock()
	}
	storeDir, err := os.MkdirTemp("", "forkfuzz-js-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(storeDir)
	srv, err := dist.StartServer(dist.ServerConfig{Listen: "127.0.0.1:0", StoreDir: storeDir})
	if err != nil {
		return fail(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("forkfuzz-run")
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ctx, stop := signalContext()
	defer stop()
	st, err := dist.Open(ctx, nc)
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cctx, stopCoord := context.WithCancel(ctx)
	defer stopCoord()
	actx, stopAgent := context.WithCancel(ctx)
	var agentErr error
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_, err := dist.RunWorker(actx, dist.WorkerConfig{Store: st, ID: "local", Kind: kind, Target: t,
			MinimizeRuns: minRuns, MinimizeTime: minTime, Log: log, TargetArgs: cfg.TargetArgs, KernelID: cfg.Kernel})
		if err != nil && actx.Err() == nil {
			agentErr = err
			stopCoord() // the agent gave up: so does the campaign
		}
	}()
	fmt.Fprintf(stdout, "campaign: target %s over JetStream (in-process), seed %d (%s)\n", t.Name(), cfg.Seed, campaign.SeedRule(cfg.Seed))
	var arenaNote string
	if cfg.Weights, arenaNote = campaign.ArenaWeights(t, cfg.Weights); arenaNote != "" {
		fmt.Fprintf(stdout, "campaign: %s\n", arenaNote)
	}
	if w, note := campaign.HugetlbWeights(t, cfg.Weights); note != "" {
		cfg.Weights = w
		fmt.Fprintf(stdout, "campaign: %s\n", note)
	}
	if w, note := campaign.FileWeights(t, cfg.Weights); note != "" {
		cfg.Weights = w
		fmt.Fprintf(stdout, "campaign: %s\n", note)
	}
	cs, err := dist.RunCoordinator(cctx, dist.CoordinatorConfig{Store: st, Campaign: "run", Seed: cfg.Seed,
		Programs: cfg.Programs, Duration: cfg.Duration, Target: kind, Corrupt: cfg.Corrupt, Weights: cfg.Weights,
		Workdir: cfg.Workdir, Blind: cfg.Blind, Queue: 4, Progress: cfg.Progress, ProgressLines: cfg.ProgressLines, ProgressEvery: cfg.ProgressEvery, Log: log})
	stopAgent()
	<-agentDone
	if err != nil {
		return fail(err)
	}
	printDistSummary(stdout, cs, "run")
	if agentErr != nil {
		return fail(agentErr)
	}
	if cs.Findings > 0 || cs.Events > 0 {
		return exitFindings
	}
	return exitClean
}
