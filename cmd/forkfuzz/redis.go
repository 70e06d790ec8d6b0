package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/campaign/latency"
	"github.com/forkfuzz/forkfuzz/campaign/redis"
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

func cmdRedis(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("redis", stderr)
	var series listFlag
	fs.Var(&series, "series", "where to run, NAME=TARGET[,kernel=PATH][,memory=MiB][,cmdline=WORD][,write=PATH:VALUE] (TARGET native or vm; repeatable; default host=native)")
	keys := fs.Int("keys", 100000, "keys loaded before the writer load")
	size := fs.Int("value-size", 1000, "bytes per value (>= 24)")
	writers := fs.Int("writers", 2, "writer connections (each owns a share of the keys)")
	rounds := fs.Int("rounds", 3, "BGSAVEs")
	before := fs.Duration("before", 300*time.Millisecond, "writer load before each BGSAVE")
	after := fs.Duration("after", 300*time.Millisecond, "writer load after each BGSAVE finished")
	seed := fs.Uint64("seed", 0, "writer seed (0: random, printed)")
	workdir := fs.String("workdir", "", "where host RDB files and logs go (default: a temporary directory, removed)")
	cache := fs.String("cache", redis.DefaultCache(), "where Debian's redis-server is unpacked")
	fetch := fs.Bool("fetch", false, "fetch redis-server with apt-get download into --cache if it is not there")
	svgOut := fs.String("svg", "", "write the latency figure here")
	accel := fs.String("accel", "auto", "VM accelerator: auto, kvm, tcg")
	corrupt := fs.String("corrupt", "", "TEST ONLY: falsify the snapshot read back ("+strings.Join(redis.Corruptions, ", ")+")")
	positive(fs, "keys", "value-size", "writers", "rounds")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	switch {
	case *size < 24:
		fmt.Fprintf(stderr, "forkfuzz redis: --value-size %d: want at least 24 bytes (room for the version number each value carries)\n", *size)
		return exitError
	case *keys < *writers:
		fmt.Fprintf(stderr, "forkfuzz redis: --keys %d --writers %d: want at least one key per writer\n", *keys, *writers)
		return exitError
	}
	if *corrupt != "" {
		ok := false
		for _, c := range redis.Corruptions {
			ok = ok || c == *corrupt
		}
		if !ok {
			fmt.Fprintf(stderr, "forkfuzz redis: --corrupt %q: want one of %s\n", *corrupt, strings.Join(redis.Corruptions, ", "))
			return exitError
		}
	}
	if len(series) == 0 {
		series = listFlag{"host=native"}
	}
	var ss []latency.Series
	for _, s := range series {
		sr, err := latency.ParseSeries(s)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz redis: --series:", err)
			return exitError
		}
		ss = append(ss, sr)
	}
	bin, err := redis.Find(*cache)
	if err != nil && *fetch {
		bin, err = redis.Fetch(*cache)
	}
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz redis:", err)
		return exitError
	}
	if *seed == 0 {
		*seed = rand.Uint64()
	}
	dir := *workdir
	if dir == "" {
		d, err := os.MkdirTemp("", "forkfuzz-redis-")
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz redis:", err)
			return exitError
		}
		defer os.RemoveAll(d)
		dir = d
	}
	fmt.Fprintf(stderr, "forkfuzz redis: seed %d, server %s\n", *seed, bin.Path)
	req := redis.Request{Bin: bin, Keys: *keys, ValueSize: *size, Writers: *writers, Rounds: *rounds,
		BeforeMs: int(*before / time.Millisecond), AfterMs: int(*after / time.Millisecond), Seed: *seed, Corrupt: *corrupt}
	self, _ := os.Executable()
	var named []redis.Named
	kernelFindings := 0
	notes := []string{fmt.Sprintf("%d CPUs, shared loaded machine; %d keys x %d B, %d writers, %d BGSAVEs per series, seed %d",
		runtime.NumCPU(), *keys, *size, *writers, *rounds, *seed)}
	for _, s := range ss {
		q := req
		q.Writes = s.Writes
		var resp *redis.Response
		switch s.Target {
		case "native":
			q.Dir = dir + "/" + s.Name
			resp, err = redis.Serve(q)
		case "vm":
			resp, err = redisInVM(s, q, self, *accel, stderr)
		}
		var kr *vm.KernelReportError
		if errors.As(err, &kr) {
			kernelFindings++
			fmt.Fprintf(stdout, "FINDING (%s): kernel report in the VM during the Redis scenario: %s\n%s\n", s.Name, kr.Title, kr.Report)
			notes = append(notes, fmt.Sprintf("%s: kernel report in the VM: %s (no measurements)", s.Name, kr.Title))
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "forkfuzz redis: series %s: %v\n", s.Name, err)
			return exitError
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
		notes = append(notes, fmt.Sprintf("%s: kernel %s, redis %s, used_memory %s, latest_fork_usec %s%s", s.Name, resp.Uname, sum.Version, sum.UsedMem, strings.Join(forks, ", "), w))
		named = append(named, redis.Named{Name: s.Name, Summary: sum})
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, "# "+n)
	}
	for _, n := range named {
		fmt.Fprintf(stdout, "\n== %s\n", n.Name)
		n.WriteTable(stdout)
	}
	fmt.Fprintln(stdout)
	redis.WriteComparison(stdout, named)
	if *svgOut != "" {
		if err := writeFileWith(*svgOut, redis.ComparisonPlot(named, notes).WriteSVG); err != nil {
			fmt.Fprintln(stderr, "forkfuzz redis: --svg:", err)
			return exitError
		}
	}
	total, bad := 0, 0
	for _, n := range named {
		for _, rd := range n.Rounds {
			total++
			if rd.Finding != nil {
				bad++
				fmt.Fprintf(stdout, "\nFINDING (%s): %s", n.Name, rd.Finding)
			}
		}
	}
	if kernelFindings > 0 {
		fmt.Fprintf(stdout, "%d series ended in a kernel report\n", kernelFindings)
	}
	if bad > 0 || kernelFindings > 0 {
		fmt.Fprintf(stdout, "%d of %d BGSAVE snapshots are not consistent cuts (replay: --seed %d)\n", bad, total, *seed)
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
