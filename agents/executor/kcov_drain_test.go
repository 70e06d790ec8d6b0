package executor

import (
	"math/rand/v2"
	"testing"
)

// kcovTrace is a KCOV buffer of n PCs (count word first) as a kernel
// records them: a walk over a control-flow graph of blocks basic blocks
// (each with one or two successors, a quarter of them loop heads that
// repeat their body), so that, as in a fork's copy of every page table
// entry, a few edges repeat many times. Seeded.
func kcovTrace(seed uint64, blocks, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 0))
	pc := make([]uint64, blocks)
	succ := make([][2]int, blocks)
	for i := range pc {
		pc[i] = 0xffffffff81000000 + uint64(r.IntN(16<<20))&^3
		succ[i] = [2]int{(i + 1) % blocks, r.IntN(blocks)}
		if r.IntN(4) == 0 {
			succ[i][1] = max(0, i-1-r.IntN(8)) // a loop back
		}
	}
	a := make([]uint64, n+1)
	a[0] = uint64(n)
	b := 0
	for j := 1; j <= n; j++ {
		a[j] = pc[b]
		if r.IntN(8) == 0 {
			b = succ[b][0]
		} else {
			b = succ[b][1]
		}
	}
	return a
}

// drainSets is a kcovState with the main process's sets, empty.
func drainSets() *kcovState {
	k := &kcovState{ok: true, on: true, overAt: -2}
	k.pcs[0], k.edges[0] = make([]uint64, kcovMainPCs+1), make([]uint64, kcovMainEdges+1)
	return k
}

// The cache only skips pairs already drained: draining a trace through
// it gives exactly the PCs and edges of the trace.
func TestKcovDrainSets(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		trace := kcovTrace(seed, 3000, 200000)
		k := drainSets()
		wantPCs, wantEdges := map[uint64]bool{}, map[uint64]bool{}
		prev := uint64(0)
		for _, pc := range trace[1:] {
			wantPCs[pc] = true
			wantEdges[edgeHash(prev, pc)] = true
			prev = pc
		}
		// In two halves: the cache carries over between drains.
		half := len(trace) / 2
		first := append([]uint64{uint64(half - 1)}, trace[1:half]...)
		second := append([]uint64{uint64(len(trace) - half)}, trace[half:]...)
		k.drainBufAt(0, first, 0)
		k.drainBufAt(0, second, 1)
		if first[0] != 0 || second[0] != 0 {
			t.Fatalf("seed %d: buffers not emptied", seed)
		}
		gotPCs, gotEdges := setMembers(k.pcs[0]), setMembers(k.edges[0])
		if len(gotPCs) != len(wantPCs) {
			t.Errorf("seed %d: %d PCs, want %d", seed, len(gotPCs), len(wantPCs))
		}
		for _, pc := range gotPCs {
			if !wantPCs[pc] {
				t.Fatalf("seed %d: PC %#x never recorded", seed, pc)
			}
		}
		// Each drain starts its walk at prev 0: the second half's
		// first edge is (0, pc), not (last of the first half, pc).
		wantEdges[edgeHash(0, trace[half])] = true
		delete(wantEdges, edgeHash(trace[half-1], trace[half]))
		missing := 0
		for e := range wantEdges {
			if !setHas(k.edges[0], e) {
				missing++
			}
		}
		// The edge across the halves may also occur inside one.
		if missing > 0 || len(gotEdges) > len(wantEdges)+1 {
			t.Errorf("seed %d: %d edges, want %d; %d missing", seed, len(gotEdges), len(wantEdges), missing)
		}
	}
}

func setMembers(s []uint64) []uint64 {
	var out []uint64
	for _, v := range s[1:] {
		if v != 0 {
			out = append(out, v)
		}
	}
	return out
}

func setHas(s []uint64, v uint64) bool {
	slots := s[1:]
	mask := uint64(len(slots) - 1)
	for h := mix(v) & mask; ; h = (h + 1) & mask {
		switch slots[h] {
		case v:
			return true
		case 0:
			return false
		}
	}
}

// BenchmarkKcovDrain: ns per PC drained from a buffer of 1M PCs over
// 1,200 basic blocks into sets that already hold them (a program's later
// drains). The cache of (prev, pc) pairs hits 92% of this trace, about
// what it hits in the guest (docs/throughput.md).
func BenchmarkKcovDrain(b *testing.B) {
	trace := kcovTrace(1, 1200, 1<<20)
	buf := make([]uint64, len(trace))
	k := drainSets()
	copy(buf, trace)
	k.drainBufAt(0, buf, 0)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		copy(buf, trace)
		b.StartTimer()
		k.drainBufAt(0, buf, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(trace)-1), "ns/pc")
}
