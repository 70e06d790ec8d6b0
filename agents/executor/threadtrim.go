package executor

import (
	"slices"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// trimThreadLogs drops the thread stores that cannot matter to any
// consistent-cut judgement: a writer thread may log millions of stores
// while a child takes its views, but a child's snapshot is judged only
// against the fork call's interval. For every main-process fork window
// [TSCStart, TSCEnd] it keeps, per thread and cell, every store that
// overlaps the window, the last one that completed before it and the
// first one that started after it. That preserves the exact check's
// verdict: a snapshot value older than the last store before the window
// or newer than the first after it is a violation either way (the kept
// neighbour, or a value the trimmed history lacks, proves it). Trimmed
// counts what was left out. Main process only.
func trimThreadLogs(p *prog.Program, o *obs.Observation) {
	var ws []window
	for i, op := range p.Ops {
		if op.Kind == prog.OpFork && op.Proc == 0 && o.Ops[i].TSCStart != 0 {
			ws = append(ws, window{o.Ops[i].TSCStart, o.Ops[i].TSCEnd})
		}
	}
	for t := range o.Threads {
		tl := &o.Threads[t]
		if len(tl.Stores) < 4096 {
			continue // small logs are not worth it
		}
		out := keepStores(p, tl.Stores, ws, false)
		tl.Trimmed += len(tl.Stores) - len(out)
		tl.Stores = out
	}
}

// window is a main-process fork call's interval (TSC).
type window struct{ lo, hi uint64 }

// groupCells groups the indices of stores by cell (the operation and
// slot a store wrote; a storeloop's slots wrap at its count), keeping
// their order: cell c's are order[start[c]:start[c+1]]. A counting sort:
// a list per cell grown by appending was most of keepStores's time.
func groupCells(p *prog.Program, stores []obs.TimedStore) (order, start []int) {
	ids, start := cellIDs(p, stores)
	sum := 0
	for c, n := range start {
		start[c] = sum
		sum += n
	}
	start = append(start, sum)
	order = make([]int, len(stores))
	next := slices.Clone(start)
	for i, id := range ids {
		order[next[id]] = i
		next[id]++
	}
	return order, start
}

// cellIDs numbers the cells of stores in the order they first appear and
// returns each store's cell and each cell's count. A cell of an operation
// with a count is a slot below it, numbered in dense[base[op]+slot] (-1:
// not seen yet) while the counts add up to at most denseCells; other
// cells in a map.
func cellIDs(p *prog.Program, stores []obs.TimedStore) (ids []int32, counts []int) {
	const denseCells = 1 << 16
	base := make([]int, len(p.Ops))
	n := 0
	for j, op := range p.Ops {
		base[j] = -1
		if op.Count > 0 && n+op.Count <= denseCells {
			base[j] = n
			n += op.Count
		}
	}
	dense := make([]int32, n)
	for j := range dense {
		dense[j] = -1
	}
	type cellKey struct{ op, slot int }
	cellOf := make(map[cellKey]int32)
	ids = make([]int32, len(stores))
	for i, s := range stores {
		k, d := cellKey{s.Op, s.Slot}, -1
		if s.Op >= 0 && s.Op < len(p.Ops) {
			op := &p.Ops[s.Op]
			if op.Kind == prog.OpStoreLoop && op.Count > 0 {
				k.slot = s.Slot % op.Count
			}
			if base[s.Op] >= 0 && k.slot >= 0 && k.slot < op.Count {
				d = base[s.Op] + k.slot
			}
		}
		id, ok := int32(-1), false
		if d >= 0 {
			id = dense[d]
			ok = id >= 0
		} else {
			id, ok = cellOf[k]
		}
		if !ok {
			id = int32(len(counts))
			if d >= 0 {
				dense[d] = id
			} else {
				cellOf[k] = id
			}
			counts = append(counts, 0)
		}
		ids[i] = id
		counts[id]++
	}
	return ids, counts
}

// keepStores filters stores in place (one thread's log, in time order) to
// the ones trimThreadLogs keeps for the windows ws and, when latest, also
// the last store to every cell. With latest it serves a writer thread
// while it runs (compactLog): a store not kept then is no cell's last, so
// a later store to its cell lies between it and any window still to
// come, and it is neither in nor next to a window that has been.
func keepStores(p *prog.Program, stores []obs.TimedStore, ws []window, latest bool) []obs.TimedStore {
	keep := make([]bool, len(stores))
	// A thread's stores to one cell are in time order in its log.
	order, start := groupCells(p, stores)
	for c := 0; c+1 < len(start); c++ {
		idx := order[start[c]:start[c+1]]
		if latest {
			keep[idx[len(idx)-1]] = true
		}
		for _, w := range ws {
			last, first := -1, -1
			for _, i := range idx {
				s := &stores[i]
				switch {
				case s.Resp < w.lo:
					last = i
				case s.Inv > w.hi:
					if first < 0 {
						first = i
					}
				default:
					keep[i] = true
				}
			}
			if last >= 0 {
				keep[last] = true
			}
			if first >= 0 {
				keep[first] = true
			}
		}
	}
	out := stores[:0]
	for i, s := range stores {
		if keep[i] {
			out = append(out, s)
		}
	}
	return out
}
