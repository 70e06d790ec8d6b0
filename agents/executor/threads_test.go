package executor

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/checker/cut"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestWriterThreadsDuringFork runs two writer threads that store through a
// fork and the child's copy, and checks that the log is well formed and
// that the child's snapshot is a consistent cut of it on the host kernel.
func TestWriterThreadsDuringFork(t *testing.T) {
	n := 20
	if testing.Short() {
		n = 3
	}
	text := `forkfuzz v1
region r0 anon-private pages=1024 thp=on
region r1 anon-private pages=16 thp=off
store r0 off=0x0 count=1024 stride=0x1000
t1: storeloop r0 off=0x1ff000 count=64 stride=0x200 until=f0
t2: storeloop r1 off=0x0 count=16 stride=0x1000 until=f0
fork f0
store r0 off=0x200000 count=1 stride=0x8
wait f0
join t1
join t2
`
	for it := 0; it < n; it++ {
		p, o := run(t, text, Options{})
		if len(o.Threads) != 2 {
			t.Fatalf("%d thread logs", len(o.Threads))
		}
		fork := o.Ops[3]
		if fork.TSCStart == 0 || fork.TSCEnd < fork.TSCStart {
			t.Fatalf("fork TSC bounds %d..%d", fork.TSCStart, fork.TSCEnd)
		}
		h := &cut.History{ForkInv: int64(fork.TSCStart), ForkResp: int64(fork.TSCEnd), Snapshot: map[uint64]uint64{}, Initial: map[uint64]uint64{}}
		cellOf := map[uint64]bool{}
		for _, tl := range o.Threads {
			last := uint64(0)
			for _, s := range tl.Stores {
				if s.Inv < last || s.Resp < s.Inv {
					t.Fatalf("t%d: times go backwards: %+v after %d", tl.Thread, s, last)
				}
				last = s.Resp
				op := p.Ops[s.Op]
				off := op.Off + uint64(s.Slot%op.Count)*op.Stride
				cell := uint64(op.Region)<<40 | off
				cellOf[cell] = true
				if op.Region == 0 && off%prog.PageSize == 0 {
					h.Initial[cell] = prog.SlotValue(0, int(off/prog.PageSize))
				}
				h.Writes = append(h.Writes, cut.Write{Thread: tl.Thread, Cell: cell, Value: s.Value, Inv: int64(s.Inv), Resp: int64(s.Resp)})
			}
			if loops := o.Ops[tl.Thread].Ret; loops == 0 || len(tl.Stores) == 0 {
				t.Fatalf("t%d: %d loops, %d stores", tl.Thread, loops, len(tl.Stores))
			}
		}
		var child *obs.View
		for i := range o.Views {
			if o.Views[i].Proc == 1 {
				child = &o.Views[i]
			}
		}
		for _, w := range child.Words {
			if cell := uint64(w.Region)<<40 | w.Off; cellOf[cell] {
				h.Snapshot[cell] = w.Value
			}
		}
		for cell := range cellOf {
			if _, ok := h.Snapshot[cell]; !ok {
				h.Snapshot[cell] = 0
			}
		}
		overlap := 0
		for _, w := range h.Writes {
			if w.Inv <= h.ForkResp && w.Resp >= h.ForkInv {
				overlap++
			}
		}
		if it == 0 {
			t.Logf("%d stores, %d overlapping the fork call (%d ticks)", len(h.Writes), overlap, h.ForkResp-h.ForkInv)
		}
		if v := cut.Check(h); v.Result != cut.Ok {
			t.Fatalf("iteration %d: the host kernel's snapshot is not a consistent cut: %v: %s", it, v.Result, v.Reason)
		}
	}
}

// TestStoreLoopLogBounded: a storeloop that runs until a late wait ends
// when it has logged maxLoopLog stores, instead of logging millions (a
// heap of hundreds of MB in a VM) and then dropping stores (which makes
// the consistent-cut judgement undecided: a finding).
func TestStoreLoopLogBounded(t *testing.T) {
	text := `forkfuzz v1
region r0 anon-private pages=16 thp=off
region r1 memfd-shared pages=128 thp=off
t1: storeloop r0 off=0x0 count=1 stride=0x8 until=f0
fork f0
pwrite r1 off=0x0 count=65536 stride=0x8
pwrite r1 off=0x0 count=65536 stride=0x8
pwrite r1 off=0x0 count=65536 stride=0x8
pwrite r1 off=0x0 count=65536 stride=0x8
pwrite r1 off=0x0 count=65536 stride=0x8
pwrite r1 off=0x0 count=65536 stride=0x8
wait f0
join t1
`
	_, o := run(t, text, Options{})
	if len(o.Threads) != 1 {
		t.Fatalf("%d thread logs", len(o.Threads))
	}
	tl := o.Threads[0]
	loops := o.Ops[0].Ret
	if tl.Dropped != 0 || loops == 0 || loops > maxLoopLog || len(tl.Stores)+tl.Trimmed > maxLoopLog+1 {
		t.Fatalf("storeloop: %d passes, %d stores logged, %d trimmed, %d dropped (bound %d)", loops, len(tl.Stores), tl.Trimmed, tl.Dropped, maxLoopLog)
	}
	t.Logf("storeloop: %d passes (bound %d), %d stores kept, %d trimmed", loops, maxLoopLog, len(tl.Stores), tl.Trimmed)
}

// TestWorkerKeepsNothingResident: a thread worker gets its own VMA table
// (not a copy of the main machine's, which would make the whole array
// resident in every fork) and hands its store log to the observation when
// the program's threads finish, keeping no reference to it.
func TestWorkerKeepsNothingResident(t *testing.T) {
	rep := make([]byte, obs.HeaderSize+16*obs.RecordSize)
	m := newMachine(rep, make([]byte, ctlSize), make([]byte, 4096))
	w := m.th.worker(1, m)
	if w.m.vmas == m.vmas {
		t.Fatal("the worker's machine shares the main machine's VMA table")
	}
	w.log.Stores = append(w.log.Stores, obs.TimedStore{Op: 3, Slot: 1, Value: 7})
	logs := m.finishThreads()
	if len(logs) != 1 || len(logs[0].Stores) != 1 || logs[0].Stores[0].Value != 7 {
		t.Fatalf("finishThreads returned %+v, want the worker's one store", logs)
	}
	if w.log.Stores != nil || w.used {
		t.Errorf("after finishThreads the worker still holds its log (%d stores, used %v)", len(w.log.Stores), w.used)
	}
	close(w.queue)
}
