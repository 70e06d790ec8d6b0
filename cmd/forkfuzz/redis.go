package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign/redis"
)

func init() {
	commands = append(commands, command{name: "redis", args: "[flags]",
		help: "Redis BGSAVE under a writer load: snapshot consistency (findings) and latency", run: cmdRedis})
}

func cmdRedis(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("redis", stderr)
	keys := fs.Int("keys", 100000, "keys loaded before the writer load")
	size := fs.Int("value-size", 1000, "bytes per value (>= 24)")
	writers := fs.Int("writers", 2, "writer connections (each owns a share of the keys)")
	rounds := fs.Int("rounds", 3, "BGSAVEs")
	before := fs.Duration("before", 300*time.Millisecond, "writer load before each BGSAVE")
	after := fs.Duration("after", 300*time.Millisecond, "writer load after each BGSAVE finished")
	seed := fs.Uint64("seed", 0, "writer seed (0: random, printed)")
	workdir := fs.String("workdir", "", "where RDB files and logs go (default: a temporary directory, removed)")
	cache := fs.String("cache", redis.DefaultCache(), "where Debian's redis-server is unpacked")
	fetch := fs.Bool("fetch", false, "fetch redis-server with apt-get download into --cache if it is not there")
	svgOut := fs.String("svg", "", "write the latency figure here")
	corrupt := fs.String("corrupt", "", "TEST ONLY: falsify the snapshot read back ("+strings.Join(redis.Corruptions, ", ")+")")
	if fs.Parse(args) != nil {
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
	res, err := redis.Run(redis.Config{Bin: bin, Dir: dir, Keys: *keys, ValueSize: *size, Writers: *writers, Rounds: *rounds,
		Before: *before, After: *after, Seed: *seed, Corrupt: *corrupt, Log: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz redis:", err)
		return exitError
	}
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	notes := []string{
		fmt.Sprintf("host kernel %s, %d CPUs, shared loaded machine; redis %s, %d keys x %d B (used_memory %s), %d writers, %d BGSAVEs, seed %d",
			strings.TrimSpace(string(b)), runtime.NumCPU(), res.Version, *keys, *size, res.UsedMem, *writers, *rounds, *seed),
	}
	var forks []string
	for _, rd := range res.Rounds {
		forks = append(forks, fmt.Sprint(rd.ForkUsec))
	}
	notes = append(notes, "latest_fork_usec per BGSAVE: "+strings.Join(forks, ", "))
	for _, n := range notes {
		fmt.Fprintln(stdout, "# "+n)
	}
	res.WriteTable(stdout)
	if *svgOut != "" {
		if err := writeFileWith(*svgOut, res.Plot(notes).WriteSVG); err != nil {
			fmt.Fprintln(stderr, "forkfuzz redis: --svg:", err)
			return exitError
		}
	}
	if n := res.Findings(); n > 0 {
		for _, rd := range res.Rounds {
			if rd.Finding != nil {
				fmt.Fprint(stdout, "\nFINDING: "+rd.Finding.String())
			}
		}
		fmt.Fprintf(stdout, "%d of %d BGSAVE snapshots are not consistent cuts (replay: --seed %d)\n", n, len(res.Rounds), *seed)
		return exitFindings
	}
	fmt.Fprintf(stdout, "all %d BGSAVE snapshots are consistent cuts of the write history\n", len(res.Rounds))
	return exitClean
}
