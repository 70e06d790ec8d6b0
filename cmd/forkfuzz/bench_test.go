package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/bench/redis"
)

func TestBenchForkOutputsAndGate(t *testing.T) {
	dir := t.TempDir()
	csv, svg := filepath.Join(dir, "b.csv"), filepath.Join(dir, "b.svg")
	args := []string{"bench", "fork", "-q", "--sizes", "2M,4M", "--reps", "2", "--series", "a=native,pages=4k", "--series", "b=native,pages=thp",
		"--csv", csv, "--svg", svg, "--at-size", "4M"}
	code, out, errs := forkfuzz(t, append(args, "--max-ratio", "1000")...)
	if code != exitClean || !strings.Contains(out, "latency gate passed") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	b, _ := os.ReadFile(csv)
	if n := strings.Count(string(b), "\n"); n != 1+2*2*2 {
		t.Errorf("CSV has %d lines, want 9:\n%s", n, b)
	}
	if b, _ := os.ReadFile(svg); !strings.Contains(string(b), "<svg") || strings.Count(string(b), "<polyline") != 5 {
		t.Errorf("SVG missing or without its 5 lines")
	}
	// Any positive time is more than 1e-9 times the baseline's.
	code, out, errs = forkfuzz(t, append(args, "--max-ratio", "1e-9")...)
	if code != exitFindings || !strings.Contains(out, "LATENCY GATE FAILED: series b at 4 MiB") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

func TestBenchForkBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "fork", "--sizes", "3M"}, "not a multiple of 2M"},
		{[]string{"bench", "fork", "--series", "x=qemu"}, "want native or vm"},
		{[]string{"bench", "fork", "--sizes", "2M", "--max-ratio", "2", "--at-size", "4M"}, "not one of --sizes"},
		{[]string{"bench", "fork", "--baseline", "nope"}, "no series named"},
		{[]string{"bench", "forks"}, `unknown subcommand "forks" (did you mean fork?)`},
		{[]string{"redis", "--corrupt", "x"}, "want one of"},
	} {
		code, _, errs := forkfuzz(t, c.args...)
		if code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q (want exit 2 and %q)", c.args, code, errs, c.want)
		}
	}
}

func TestRedisCorruptionIsAFinding(t *testing.T) {
	if _, err := redis.Find(redis.DefaultCache()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: .ci/deps fetches redis-server, but: %v", err)
		}
		t.Skipf("no redis-server: %v", err)
	}
	svg := filepath.Join(t.TempDir(), "r.svg")
	// 20000 keys: on a loaded machine the BGSAVE child ran for half a
	// second while the writers rewrote every one of 2000 keys, and the
	// drop-old corruption found no key written only before the fork.
	code, out, errs := forkfuzz(t, "redis", "--keys", "20000", "--value-size", "100", "--rounds", "1", "--before", "50ms", "--after", "50ms", "--seed", "3", "--corrupt", "drop-old", "--svg", svg)
	if code != exitFindings || !strings.Contains(out, "FINDING (host)") || !strings.Contains(out, "the RDB holds (absent)") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if b, _ := os.ReadFile(svg); !strings.Contains(string(b), "latest_fork_usec") {
		t.Errorf("latency figure missing or without latest_fork_usec")
	}
}
