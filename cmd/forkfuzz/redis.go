package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/bench/latency"
	"github.com/forkfuzz/forkfuzz/bench/redis"
)

func init() {
	commands = append(commands, command{name: "redis", args: "[flags]",
		help: "Redis BGSAVE under a writer load (host, QEMU VMs): snapshot consistency (findings) and latency", run: cmdRedis})
}

// redisWorker serves {"redis": Request} in bench-worker (a VM's guest).
func redisWorker(body []byte, stdout io.Writer) error {
	var env struct {
		Redis redis.Request `json:"redis"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("bench-worker: redis request: %w", err)
	}
	resp, err := redis.Serve(env.Redis)
	if err != nil {
		return fmt.Errorf("bench-worker: redis: %w", err)
	}
	return json.NewEncoder(stdout).Encode(resp)
}

// redisOptions are the flags of forkfuzz redis.
type redisOptions struct {
	fs                          *flag.FlagSet
	series                      listFlag
	keys, size, writers, rounds int
	before, after               time.Duration
	seed                        uint64
	workdir, cache, svg, accel  string
	corrupt                     string
	fetch                       bool
}

// redisRun is what the series of a redis run gave: their summaries, the
// notes that say where they ran, and how many ended in a kernel report.
type redisRun struct {
	named          []redis.Named
	notes          []string
	kernelFindings int
}

func cmdRedis(args []string, stdout, stderr io.Writer) int {
	o := redisFlags(stderr)
	if err := parseArgs(o.fs, args, ""); err != nil {
		return parseExit(err)
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "forkfuzz redis:", err)
		return exitError
	}
	ss, err := o.check()
	if err != nil {
		return fail(err)
	}
	bin, err := redis.Find(o.cache)
	if err != nil && o.fetch {
		bin, err = redis.Fetch(o.cache)
	}
	if err != nil {
		return fail(err)
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	dir := o.workdir
	if dir == "" {
		d, err := os.MkdirTemp("", "forkfuzz-redis-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	fmt.Fprintf(stderr, "forkfuzz redis: seed %d, server %s\n", o.seed, bin.Path)
	req := redis.Request{Bin: bin, Keys: o.keys, ValueSize: o.size, Writers: o.writers, Rounds: o.rounds,
		BeforeMs: int(o.before / time.Millisecond), AfterMs: int(o.after / time.Millisecond), Seed: o.seed, Corrupt: o.corrupt}
	run, err := o.run(ss, req, dir, stdout, stderr)
	if err != nil {
		return fail(err)
	}
	return o.report(run, stdout, stderr)
}

// redisFlags declares the flags of forkfuzz redis.
func redisFlags(stderr io.Writer) *redisOptions {
	o := &redisOptions{fs: newFlags("redis", stderr)}
	fs := o.fs
	fs.Var(&o.series, "series", "where to run, NAME=TARGET[,kernel=PATH][,memory=MiB][,cmdline=WORD][,write=PATH:VALUE] (TARGET native or vm; repeatable; default host=native)")
	fs.IntVar(&o.keys, "keys", 100000, "keys loaded before the writer load")
	fs.IntVar(&o.size, "value-size", 1000, "bytes per value (>= 24)")
	fs.IntVar(&o.writers, "writers", 2, "writer connections (each owns a share of the keys)")
	fs.IntVar(&o.rounds, "rounds", 3, "BGSAVEs")
	fs.DurationVar(&o.before, "before", 300*time.Millisecond, "writer load before each BGSAVE")
	fs.DurationVar(&o.after, "after", 300*time.Millisecond, "writer load after each BGSAVE finished")
	fs.Uint64Var(&o.seed, "seed", 0, "writer seed (0: random, printed)")
	fs.StringVar(&o.workdir, "workdir", "", "where host RDB files and logs go (default: a temporary directory, removed)")
	fs.StringVar(&o.cache, "cache", redis.DefaultCache(), "where Debian's redis-server is unpacked")
	fs.BoolVar(&o.fetch, "fetch", false, "fetch redis-server with apt-get download into --cache if it is not there")
	fs.StringVar(&o.svg, "svg", "", "write the latency figure here")
	fs.StringVar(&o.accel, "accel", "auto", "VM accelerator: auto, kvm, tcg")
	fs.StringVar(&o.corrupt, "corrupt", "", "TEST ONLY: falsify the snapshot read back ("+strings.Join(redis.Corruptions, ", ")+")")
	positive(fs, "keys", "value-size", "writers", "rounds")
	return o
}

// check rejects bad flags and parses the series.
func (o *redisOptions) check() ([]latency.Series, error) {
	switch {
	case o.size < 24:
		return nil, fmt.Errorf("--value-size %d: want at least 24 bytes (room for the version number each value carries)", o.size)
	case o.keys < o.writers:
		return nil, fmt.Errorf("--keys %d --writers %d: want at least one key per writer", o.keys, o.writers)
	}
	if o.corrupt != "" && !contains(redis.Corruptions, o.corrupt) {
		return nil, fmt.Errorf("--corrupt %q: want one of %s", o.corrupt, strings.Join(redis.Corruptions, ", "))
	}
	if len(o.series) == 0 {
		o.series = listFlag{"host=native"}
	}
	var ss []latency.Series
	for _, s := range o.series {
		sr, err := latency.ParseSeries(s)
		if err != nil {
			return nil, fmt.Errorf("--series: %v", err)
		}
		ss = append(ss, sr)
	}
	return ss, nil
}

// run runs the scenario on every series: on the host in dir, or in a VM.
// A kernel report in a VM is a finding, printed; any other failure ends
// the run.
func (o *redisOptions) run(ss []latency.Series, req redis.Request, dir string, stdout, stderr io.Writer) (*redisRun, error) {
	self, _ := os.Executable()
	r := &redisRun{notes: []string{fmt.Sprintf("%d CPUs, shared loaded machine; %d keys x %d B, %d writers, %d BGSAVEs per series, seed %d",
		runtime.NumCPU(), o.keys, o.size, o.writers, o.rounds, o.seed)}}
	for _, s := range ss {
		q := req
		q.Writes = s.Writes
		var resp *redis.Response
		var err error
		switch s.Target {
		case "native":
			q.Dir = dir + "/" + s.Name
			resp, err = redis.Serve(q)
		case "vm":
			resp, err = redisInVM(s, q, self, o.accel, stderr)
		}
		var kr *vm.KernelReportError
		if errors.As(err, &kr) {
			r.kernelFindings++
			fmt.Fprintf(stdout, "FINDING (%s): kernel report in the VM during the Redis scenario: %s\n%s\n", s.Name, kr.Title, kr.Report)
			r.notes = append(r.notes, fmt.Sprintf("%s: kernel report in the VM: %s (no measurements)", s.Name, kr.Title))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("series %s: %v", s.Name, err)
		}
		sum := resp.Summary
		var forks []string
		for _, rd := range sum.Rounds {
			forks = append(forks, fmt.Sprint(rd.ForkUsec))
		}
		w := ""
		if len(resp.Writes) > 0 {
			w = "; " + strings.Join(resp.Writes, "; ")
		}
		r.notes = append(r.notes, fmt.Sprintf("%s: kernel %s, redis %s, used_memory %s, latest_fork_usec %s%s", s.Name, resp.Uname, sum.Version, sum.UsedMem, strings.Join(forks, ", "), w))
		r.named = append(r.named, redis.Named{Name: s.Name, Summary: sum})
	}
	return r, nil
}

// report prints the notes, the tables, the comparison and the findings,
// writes the figure, and returns the exit status.
func (o *redisOptions) report(r *redisRun, stdout, stderr io.Writer) int {
	for _, n := range r.notes {
		fmt.Fprintln(stdout, "# "+n)
	}
	for _, n := range r.named {
		fmt.Fprintf(stdout, "\n== %s\n", n.Name)
		n.WriteTable(stdout)
	}
	fmt.Fprintln(stdout)
	redis.WriteComparison(stdout, r.named)
	if o.svg != "" {
		if err := writeFileWith(o.svg, redis.ComparisonPlot(r.named, r.notes).WriteSVG); err != nil {
			fmt.Fprintln(stderr, "forkfuzz redis: --svg:", err)
			return exitError
		}
	}
	total, bad := 0, 0
	for _, n := range r.named {
		for _, rd := range n.Rounds {
			total++
			if rd.Finding != nil {
				bad++
				fmt.Fprintf(stdout, "\nFINDING (%s): %s", n.Name, rd.Finding)
			}
		}
	}
	if r.kernelFindings > 0 {
		fmt.Fprintf(stdout, "%d series ended in a kernel report\n", r.kernelFindings)
	}
	if bad > 0 || r.kernelFindings > 0 {
		fmt.Fprintf(stdout, "%d of %d BGSAVE snapshots are not consistent cuts (replay: --seed %d)\n", bad, total, o.seed)
		return exitFindings
	}
	fmt.Fprintf(stdout, "all %d BGSAVE snapshots are consistent cuts of the write history\n", total)
	return exitClean
}

// redisInVM boots s's kernel with redis-server and its libraries in the
// initramfs and runs the scenario in the guest.
func redisInVM(s latency.Series, q redis.Request, self, accel string, log io.Writer) (*redis.Response, error) {
	files, err := redis.GuestFiles(q.Bin)
	if err != nil {
		return nil, err
	}
	tf := &vm.TargetFile{Path: "(forkfuzz redis)"}
	tf.Files = append(tf.Files, vm.File{Host: q.Bin.Path, Guest: q.Bin.Path})
	for _, f := range files {
		tf.Files = append(tf.Files, vm.File{Host: f, Guest: f})
	}
	fmt.Fprintf(log, "redis: booting %s (%d MiB) with redis-server and %d libraries ...\n", s.Kernel, s.Memory, len(files))
	t, err := vm.New(vm.Config{Kernel: s.Kernel, Agent: self, Memory: s.Memory, CPUs: 2, Accel: accel, Log: log, TargetFile: tf, Cmdline: s.Cmdline})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	q.Dir = "/tmp/redis-scenario"
	body, _ := json.Marshal(map[string]any{"redis": q})
	raw, err := t.Bench(body, 30*time.Minute)
	if err != nil {
		return nil, err
	}
	var resp redis.Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("guest answer: %w", err)
	}
	return &resp, nil
}
