package executor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker/cut"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestTrimThreadLogsKeepsVerdicts: for every value a child could have seen
// in a cell (initial, any store's), the consistent-cut verdict on the
// trimmed log equals the verdict on the full log.
func TestTrimThreadLogsKeepsVerdicts(t *testing.T) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=1
t1: storeloop r0 off=0x0 count=2 stride=0x8 until=f0
fork f0
wait f0
join t1
`))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	o := &obs.Observation{Ops: make([]obs.OpResult, len(p.Ops))}
	o.Ops[1].TSCStart, o.Ops[1].TSCEnd = 50000, 50300
	tl := obs.ThreadLog{Thread: 1}
	for k := 0; k < n; k++ {
		inv := uint64(10 * k)
		tl.Stores = append(tl.Stores, obs.TimedStore{Op: 0, Slot: k, Value: prog.SlotValue(0, k), Inv: inv, Resp: inv + 7})
	}
	o.Threads = []obs.ThreadLog{tl}
	full := append([]obs.TimedStore(nil), tl.Stores...)
	trimThreadLogs(p, o)
	kept := o.Threads[0].Stores
	if len(kept) > 100 || o.Threads[0].Trimmed != n-len(kept) {
		t.Fatalf("kept %d stores, trimmed %d of %d", len(kept), o.Threads[0].Trimmed, n)
	}
	hist := func(stores []obs.TimedStore, snap map[uint64]uint64) *cut.History {
		h := &cut.History{ForkInv: 50000, ForkResp: 50300, Snapshot: snap, Initial: map[uint64]uint64{}}
		for _, s := range stores {
			h.Writes = append(h.Writes, cut.Write{Thread: 1, Cell: uint64(s.Slot % 2), Value: s.Value, Inv: int64(s.Inv), Resp: int64(s.Resp)})
		}
		return h
	}
	// Every pair of values for the two cells near the window, and far
	// from it, plus the initial zero.
	var cands []uint64
	for _, k := range []int{0, 1, 2, 3, 4900, 4901, 4990, 4991, 4996, 4997, 4998, 4999, 5000, 5001, 5028, 5029, 5030, 5031, 5032, 5033, 5040, 5041, 15000, 15001} {
		cands = append(cands, prog.SlotValue(0, k))
	}
	cands = append(cands, 0)
	checked, ok := 0, 0
	for _, a := range cands {
		for _, b := range cands {
			snap := map[uint64]uint64{0: a, 1: b}
			vf := cut.Check(hist(full, snap))
			vt := cut.Check(hist(kept, snap))
			if vf.Result != vt.Result {
				t.Fatalf("snapshot %s: full log says %v (%s), trimmed %v (%s)", fmt.Sprint(snap), vf.Result, vf.Reason, vt.Result, vt.Reason)
			}
			checked++
			if vf.Result == cut.Ok {
				ok++
			}
		}
	}
	if ok == 0 || ok == checked {
		t.Fatalf("%d of %d snapshots consistent: the test needs both kinds", ok, checked)
	}
	t.Logf("%d snapshots, %d consistent, same verdicts; kept %d of %d stores", checked, ok, len(kept), n)
}

// A writer's log compacted while it runs (compactLog: keepStores with
// the windows that have ended and every cell's last store), at any
// moment no fork is in flight, trims at the end to exactly what the whole
// log trims to.
func TestCompactKeepsTrim(t *testing.T) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=1
t1: storeloop r0 off=0x0 count=5 stride=0x8 until=f2
t1: store r0 off=0x100 count=3 stride=0x8
fork f0
wait f0
fork f1
wait f1
fork f2
wait f2
join t1
`))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		const n = 6000
		var full []obs.TimedStore
		var at uint64 // one thread's stores follow one another
		for k := 0; k < n; k++ {
			inv := at + uint64(1+r.IntN(6))
			at = inv + uint64(1+r.IntN(8))
			s := obs.TimedStore{Op: 0, Slot: k, Value: prog.SlotValue(0, k), Inv: inv, Resp: at}
			if r.IntN(50) == 0 { // now and then the plain store, cells 0-2
				s.Op, s.Slot, s.Value = 1, r.IntN(3), prog.SlotValue(1, k)
			}
			full = append(full, s)
		}
		var ws []window
		for lo := uint64(r.IntN(5000)); lo < at && len(ws) < 3; lo += uint64(5000 + r.IntN(20000)) {
			ws = append(ws, window{lo, lo + uint64(1+r.IntN(3000))})
		}
		var cur []obs.TimedStore
		compactions := 0
		for _, s := range full {
			cur = append(cur, s)
			if r.IntN(400) != 0 {
				continue
			}
			now := s.Resp + 1 // every logged store completed before the check
			var known []window
			inFlight := false
			for _, w := range ws {
				switch {
				case w.hi < now:
					known = append(known, w)
				case w.lo <= now:
					inFlight = true
				}
			}
			if inFlight {
				continue
			}
			cur = keepStores(p, cur, known, true)
			compactions++
		}
		want := keepStores(p, append([]obs.TimedStore(nil), full...), ws, false)
		got := keepStores(p, cur, ws, false)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("trial %d (%d compactions, windows %v): compacted log trims to %d stores, the whole log to %d", trial, compactions, ws, len(got), len(want))
		}
		if trial == 0 {
			t.Logf("%d stores, %d compactions: %d left before the final trim, %d after", n, compactions, len(cur), len(got))
		}
	}
}

// A full log makes room by compaction when no fork is in flight, and
// doubles when what must stay fills more than half of it.
func TestMakeRoom(t *testing.T) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=1
t1: storeloop r0 off=0x0 count=4 stride=0x8 until=f0
fork f0
wait f0
join t1
`))
	if err != nil {
		t.Fatal(err)
	}
	fill := func() *worker {
		w := &worker{m: &machine{p: p, th: new(threadSet)}}
		w.log.Stores = make([]obs.TimedStore, 0, compactMin)
		for k := 0; k < compactMin; k++ {
			inv := uint64(10 * k)
			w.log.Stores = append(w.log.Stores, obs.TimedStore{Op: 0, Slot: k, Value: prog.SlotValue(0, k), Inv: inv, Resp: inv + 5})
		}
		return w
	}
	// Nothing near a fork: the four cells' last stores stay.
	w := fill()
	w.makeRoom()
	if len(w.log.Stores) != 4 || cap(w.log.Stores) != compactMin || w.log.Trimmed != compactMin-4 {
		t.Errorf("compacted: %d stores, capacity %d, trimmed %d", len(w.log.Stores), cap(w.log.Stores), w.log.Trimmed)
	}
	// A fork in flight: no compaction, the log grows.
	w = fill()
	w.m.th.forkBegins()
	w.makeRoom()
	if len(w.log.Stores) != compactMin || cap(w.log.Stores) <= compactMin || w.log.Trimmed != 0 {
		t.Errorf("fork in flight: %d stores, capacity %d, trimmed %d", len(w.log.Stores), cap(w.log.Stores), w.log.Trimmed)
	}
	// A fork window over the whole log: every store stays, the log doubles.
	w = fill()
	w.m.th.forkBegins()
	w.m.th.forkEnds(0, 10*compactMin)
	w.makeRoom()
	if len(w.log.Stores) != compactMin || cap(w.log.Stores) < 2*compactMin {
		t.Errorf("all kept: %d stores, capacity %d", len(w.log.Stores), cap(w.log.Stores))
	}
}

// BenchmarkKeepStores trims one writer's log of 256K stores (a storeloop
// over 64 cells and a few plain stores) to three fork windows.
func BenchmarkKeepStores(b *testing.B) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=1
t1: storeloop r0 off=0x0 count=64 stride=0x8 until=f0
t1: store r0 off=0x400 count=3 stride=0x8
fork f0
wait f0
join t1
`))
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var full []obs.TimedStore
	var at uint64
	for k := 0; k < 1<<18; k++ {
		inv := at + uint64(1+r.IntN(6))
		at = inv + uint64(1+r.IntN(8))
		s := obs.TimedStore{Op: 0, Slot: k, Value: prog.SlotValue(0, k), Inv: inv, Resp: at}
		if r.IntN(50) == 0 {
			s.Op, s.Slot = 1, r.IntN(3)
		}
		full = append(full, s)
	}
	ws := []window{{at / 4, at/4 + 3000}, {at / 2, at/2 + 3000}, {at * 3 / 4, at*3/4 + 3000}}
	buf := make([]obs.TimedStore, len(full))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, full)
		if out := keepStores(p, buf, ws, true); len(out) == 0 {
			b.Fatal("nothing kept")
		}
	}
}
