package executor

import (
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

// keepStores filters stores in place (one thread's log, in time order) to
// the ones trimThreadLogs keeps for the windows ws and, when latest, also
// the last store to every cell. With latest it serves a writer thread
// while it runs (compactLog): a store not kept then is no cell's last, so
// a later store to its cell lies between it and any window still to
// come, and it is neither in nor next to a window that has been.
func keepStores(p *prog.Program, stores []obs.TimedStore, ws []window, latest bool) []obs.TimedStore {
	type cellKey struct{ op, slot int }
	keep := make([]bool, len(stores))
	// A thread's stores to one cell are in time order in its log.
	cells := make(map[cellKey][]int)
	for i, s := range stores {
		k := cellKey{s.Op, s.Slot}
		if s.Op >= 0 && s.Op < len(p.Ops) {
			if op := &p.Ops[s.Op]; op.Kind == prog.OpStoreLoop && op.Count > 0 {
				k.slot = s.Slot % op.Count
			}
		}
		cells[k] = append(cells[k], i)
	}
	for _, idx := range cells {
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
