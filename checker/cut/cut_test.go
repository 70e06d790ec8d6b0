package cut

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "random seed for property tests (0: time-based, logged)")

func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

// Two threads: t1 writes cell 1 then cell 2; t2 writes cell 3.
func base() *History {
	return &History{
		Writes: []Write{
			{Thread: 1, Cell: 1, Value: 0xa1, Inv: 10, Resp: 12},
			{Thread: 1, Cell: 2, Value: 0xa2, Inv: 20, Resp: 22},
			{Thread: 1, Cell: 1, Value: 0xa3, Inv: 30, Resp: 32},
			{Thread: 2, Cell: 3, Value: 0xb1, Inv: 15, Resp: 25},
		},
		ForkInv: 18, ForkResp: 28,
	}
}

func TestCheckTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		snap   map[uint64]uint64
		result Result
		reason string
	}{
		{"cut before a2", map[uint64]uint64{1: 0xa1, 2: 0, 3: 0}, Ok, ""},
		{"cut after a2 and b1", map[uint64]uint64{1: 0xa1, 2: 0xa2, 3: 0xb1}, Ok, ""},
		{"b1 either way", map[uint64]uint64{1: 0xa1, 2: 0xa2, 3: 0}, Ok, ""},
		{"torn: later write without earlier", map[uint64]uint64{1: 0, 2: 0xa2}, Violation, "thread t1 wrote 0xa1"},
		{"leak: write after fork returned", map[uint64]uint64{1: 0xa3}, Violation, "after fork returned"},
		{"stale: misses write done before fork", map[uint64]uint64{1: 0}, Violation, "before fork was called"},
		{"garbage", map[uint64]uint64{2: 0xdead}, Violation, "no write in the history wrote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			h.Snapshot = tc.snap
			v := Check(h)
			if v.Result != tc.result || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("got %v %q, want %v containing %q", v.Result, v.Reason, tc.result, tc.reason)
			}
			pv, _, _ := Porcupine(h, 10*time.Second)
			if pv.Result != tc.result {
				t.Fatalf("porcupine says %v, exact check %v", pv.Result, v.Result)
			}
		})
	}
}

func TestConcurrentWritersNeedPorcupine(t *testing.T) {
	h := &History{
		Writes: []Write{
			{Thread: 1, Cell: 1, Value: 1, Inv: 10, Resp: 20},
			{Thread: 2, Cell: 1, Value: 2, Inv: 12, Resp: 18},
		},
		ForkInv: 25, ForkResp: 30,
		Snapshot: map[uint64]uint64{1: 1},
	}
	if v := Check(h); v.Result != Unknown {
		t.Fatalf("exact check on concurrent writers: %v", v.Result)
	}
	if v := Decide(h, 10*time.Second); v.Result != Ok {
		t.Fatalf("either order is possible, got %v %s", v.Result, v.Reason)
	}
	h.Snapshot[1] = 0
	if v := Decide(h, 10*time.Second); v.Result != Violation {
		t.Fatalf("both writes done before fork, snapshot has neither: %v", v.Result)
	}
}

// randomHistory builds single-writer histories: each thread owns cells and
// writes them in order with non-overlapping intervals; the snapshot is a
// consistent cut at a random instant, optionally perturbed.
func randomHistory(r *rand.Rand, threads, writes int, perturb bool) *History {
	h := &History{Initial: map[uint64]uint64{}, Snapshot: map[uint64]uint64{}}
	type cellState struct{ vals []Write }
	var all []Write
	for th := 1; th <= threads; th++ {
		now := int64(r.IntN(5))
		for i := 0; i < writes/threads; i++ {
			inv := now + int64(r.IntN(4))
			resp := inv + int64(r.IntN(4))
			now = resp + 1
			cell := uint64(th*100 + r.IntN(4))
			all = append(all, Write{Thread: th, Cell: cell, Value: uint64(th)<<32 | uint64(i+1), Inv: inv, Resp: resp})
		}
	}
	h.Writes = all
	end := int64(0)
	for _, w := range all {
		end = max(end, w.Resp)
	}
	h.ForkInv = int64(r.IntN(int(end + 2)))
	h.ForkResp = h.ForkInv + int64(r.IntN(6))
	// A consistent snapshot at T: per cell, the last write with a
	// linearization point before T, choosing points inside intervals.
	T := h.ForkInv + int64(r.IntN(int(h.ForkResp-h.ForkInv+1)))
	for c, ws := range byCell(all) {
		v := uint64(0)
		for _, w := range ws {
			if w.Resp < T || (w.Inv <= T && r.IntN(2) == 0) {
				v = w.Value
			} else {
				break
			}
		}
		h.Snapshot[c] = v
	}
	if perturb {
		cells := byCell(all)
		for c, ws := range cells {
			if r.IntN(3) == 0 {
				h.Snapshot[c] = ws[r.IntN(len(ws))].Value
			}
		}
	}
	return h
}

func TestCheckAgreesWithPorcupine(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	n := 3000
	if testing.Short() {
		n = 300
	}
	var ok, bad int
	for i := 0; i < n; i++ {
		h := randomHistory(r, 1+r.IntN(3), 2+r.IntN(12), r.IntN(2) == 0)
		v := Check(h)
		pv, _, _ := Porcupine(h, 10*time.Second)
		if v.Result != pv.Result {
			t.Fatalf("history %d: exact %v (%s), porcupine %v\n%+v", i, v.Result, v.Reason, pv.Result, h)
		}
		tv, _, _ := Porcupine(Trim(h), 10*time.Second)
		if tv.Result != pv.Result {
			t.Fatalf("history %d: trimming changed porcupine's verdict %v -> %v\n%+v\n%+v", i, pv.Result, tv.Result, h, Trim(h))
		}
		if v.Result == Ok {
			ok++
		} else {
			bad++
		}
	}
	if ok == 0 || bad == 0 {
		t.Fatalf("property test did not exercise both outcomes: %d ok, %d violations", ok, bad)
	}
	t.Logf("%d consistent, %d violations, all agreed", ok, bad)
}

func TestVisualize(t *testing.T) {
	h := base()
	h.Snapshot = map[uint64]uint64{1: 0, 2: 0xa2}
	v, m, info := Porcupine(h, 10*time.Second)
	if v.Result != Violation {
		t.Fatal(v)
	}
	var b bytes.Buffer
	if err := Visualize(m, info, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<html") || !strings.Contains(b.String(), "write 0x2 := 0xa2") {
		t.Fatalf("visualization lacks the history: %.300s", b.String())
	}
}

// BenchmarkCheck measures the exact check on histories of n writes from 8
// threads overlapping a fork; BenchmarkPorcupine the general search on the
// same histories where it finishes (with a 20 s limit).
func benchHistory(n int) *History {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	h := &History{Snapshot: map[uint64]uint64{}}
	threads := 8
	per := n / threads
	for th := 1; th <= threads; th++ {
		for i := 0; i < per; i++ {
			inv := int64(i*10 + r.IntN(3))
			h.Writes = append(h.Writes, Write{Thread: th, Cell: uint64(th)<<32 | uint64(i%512), Value: uint64(th)<<32 | uint64(i+1), Inv: inv, Resp: inv + 5})
		}
	}
	h.ForkInv, h.ForkResp = int64(per*10/2), int64(per*10/2+40)
	T := h.ForkInv + 20
	for c, ws := range byCell(h.Writes) {
		v := uint64(0)
		for _, w := range ws {
			if w.Resp < T {
				v = w.Value
			}
		}
		h.Snapshot[c] = v
	}
	return h
}

var benchSizes = []int{1000, 10000, 100000, 1000000}

func BenchmarkCheck(b *testing.B) {
	for _, n := range benchSizes {
		h := benchHistory(n)
		b.Run(fmt.Sprintf("writes=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if v := Check(h); v.Result != Ok {
					b.Fatal(v)
				}
			}
		})
	}
}

func BenchmarkPorcupine(b *testing.B) {
	for _, n := range benchSizes[:2] {
		h := benchHistory(n)
		b.Run(fmt.Sprintf("writes=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if v, _, _ := Porcupine(h, 20*time.Second); v.Result != Ok {
					b.Fatalf("%v %s", v.Result, v.Reason)
				}
			}
		})
		b.Run(fmt.Sprintf("trimmed/writes=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if v, _, _ := Porcupine(Trim(h), 20*time.Second); v.Result != Ok {
					b.Fatalf("%v %s", v.Result, v.Reason)
				}
			}
		})
	}
}
