package redis

import (
	"os"
	"strings"
	"testing"
	"time"
)

// history: two keys, each written by its own writer: a (writer 0) v1 at
// [0,10] (load), v3 at [100,110], v5 at [300,310]; b (writer 1) v2 at
// [0,10] (load), v4 at [150,160]. BGSAVE call [200,220].
func history() []Op {
	return []Op{
		{Writer: 0, Key: 0, Val: 1, Inv: 0, Resp: 10, Load: true},
		{Writer: 1, Key: 1, Val: 2, Inv: 0, Resp: 10, Load: true},
		{Writer: 0, Key: 0, Val: 3, Inv: 100, Resp: 110},
		{Writer: 1, Key: 1, Val: 4, Inv: 150, Resp: 160},
		{Writer: 0, Key: 0, Val: 5, Inv: 300, Resp: 310},
	}
}

func TestCheck(t *testing.T) {
	ok := Snapshot{Vals: map[int]uint64{0: 3, 1: 4}}
	if f, err := Check(1, 2, history(), 200, 220, ok); err != nil || f != nil {
		t.Fatalf("consistent snapshot judged %v, %v", f, err)
	}
	for name, snap := range map[string]Snapshot{
		// a key written long before BGSAVE is missing
		"dropped": {Vals: map[int]uint64{1: 4}},
		// a stale value of a key rewritten before BGSAVE
		"stale": {Vals: map[int]uint64{0: 1, 1: 4}},
		// a value written after BGSAVE returned, the other key as of the cut
		"later": {Vals: map[int]uint64{0: 5, 1: 4}},
		// a value no write made
		"invented": {Vals: map[int]uint64{0: 99, 1: 4}},
		// a key the scenario never wrote
		"extra": {Vals: map[int]uint64{0: 3, 1: 4}, Extras: []string{`key "zzz"`}},
	} {
		f, err := Check(1, 2, history(), 200, 220, snap)
		if err != nil || f == nil {
			t.Errorf("%s: not reported (%v)", name, err)
			continue
		}
		if s := f.String(); !strings.Contains(s, "not a consistent cut") {
			t.Errorf("%s: finding text %q", name, s)
		}
	}
	// Torn: a's later value with b's earlier one, where b's write
	// completed before a's began (no instant separates them), even with a
	// BGSAVE call spanning both.
	f, err := Check(1, 2, history(), 140, 400, Snapshot{Vals: map[int]uint64{0: 5, 1: 2}})
	if err != nil || f == nil {
		t.Fatalf("torn snapshot not reported (%v)", err)
	}
	if len(f.Keys) != 2 || !strings.Contains(f.String(), "k0000000") || !strings.Contains(f.String(), "k0000001") {
		t.Errorf("torn finding does not name both keys:\n%s", f)
	}
	// The same values are fine when the cut can fall between the writes.
	if f, _ := Check(1, 2, []Op{history()[0], history()[1], {Writer: 0, Key: 0, Val: 5, Inv: 120, Resp: 130}, {Writer: 1, Key: 1, Val: 4, Inv: 150, Resp: 160}}, 100, 400,
		Snapshot{Vals: map[int]uint64{0: 5, 1: 2}}); f != nil {
		t.Errorf("consistent cut at 140 rejected:\n%s", f)
	}
}

func TestValue(t *testing.T) {
	v := Value(12345, 64)
	if len(v) != 64 {
		t.Fatalf("len %d", len(v))
	}
	if id, ok := ParseValue(v, 64); !ok || id != 12345 {
		t.Errorf("ParseValue = %d, %v", id, ok)
	}
	for _, bad := range []string{v[:63], "12345:" + strings.Repeat("y", 58), "x:", "0:" + strings.Repeat("x", 62)} {
		if _, ok := ParseValue(bad, 64); ok {
			t.Errorf("ParseValue(%.20q) accepted", bad)
		}
	}
}

func findRedis(t *testing.T) Binary {
	t.Helper()
	b, err := Find(DefaultCache())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI: .ci/deps fetches redis-server, but: %v", err)
		}
		t.Skipf("no redis-server: %v", err)
	}
	return b
}

// TestScenario runs the real scenario on the host kernel: every BGSAVE
// snapshot is a consistent cut; then each corruption of the snapshot read
// back is reported.
func TestScenario(t *testing.T) {
	bin := findRedis(t)
	cfg := Config{Bin: bin, Keys: 3000, ValueSize: 200, Writers: 2, Rounds: 3, Before: 60 * time.Millisecond, After: 60 * time.Millisecond, Seed: 1}
	cfg.Dir = t.TempDir()
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, rd := range res.Rounds {
		if rd.Finding != nil {
			t.Errorf("real BGSAVE judged inconsistent:\n%s", rd.Finding)
		}
		if rd.RDBKeys != cfg.Keys || rd.Writes == 0 || rd.ForkUsec <= 0 {
			t.Errorf("round %d: %d keys in the RDB (want %d), %d writes, latest_fork_usec %d", rd.N, rd.RDBKeys, cfg.Keys, rd.Writes, rd.ForkUsec)
		}
	}
	cl := res.Classes()
	if len(cl[0].Lat) == 0 || len(cl[1].Lat) == 0 {
		t.Errorf("latency classes empty: outside %d, during %d", len(cl[0].Lat), len(cl[1].Lat))
	}
	for _, c := range Corruptions {
		cfg.Corrupt, cfg.Rounds, cfg.Dir = c, 1, t.TempDir()
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Summarize().Findings() != 1 {
			t.Errorf("corruption %s (%s) not reported", c, res.Rounds[0].Corrupted)
		}
	}
}
