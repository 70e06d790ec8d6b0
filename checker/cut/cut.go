// Package cut decides whether a fork's snapshot is a consistent cut of a
// concurrent history of writes: whether there is an instant T inside the
// fork call such that, for every cell, the snapshot holds the last write to
// that cell linearized before T.
//
// Writes carry invocation and response times from one clock (intervals are
// closed, as in porcupine). Values are unique. When every cell has a single
// writer whose writes do not overlap (the executor's writer threads), the
// check is exact and near-linear:
//
//	for every cell c, let w_c be the write whose value the snapshot holds
//	(none for the initial value) and x_c the next write to c after w_c;
//	a cut exists iff max(ForkInv, max_c Inv(w_c)) <= min(ForkResp, min_c Resp(x_c)).
//
// Proof sketch: given such T, linearize every write up to w_c at
// min(Resp, T) and every later one at max(Inv, T); this respects real time
// (a write that must precede another cannot be after the cut while the other
// is before it) and puts exactly w_c last before T. Conversely each w_c must
// be linearized no earlier than Inv(w_c) and before T, each x_c no later
// than Resp(x_c) and after T. A violation is therefore witnessed by one pair:
// the seen write with the latest invocation and the unseen next write with
// the earliest response (or a fork bound), e.g. "t1 wrote A then B; the
// snapshot has B but not A".
//
// Cells written by several threads with overlapping intervals need the
// general search: Check answers Unknown for them and Porcupine decides, on
// the history trimmed to what can matter. Never split a snapshot into
// per-cell partitions: that would accept torn snapshots.
package cut

import (
	"fmt"
	"math"
	"sort"
)

// Write is one write of a unique value to a cell.
type Write struct {
	Thread int    `json:"thread"`
	Cell   uint64 `json:"cell"`
	Value  uint64 `json:"value"`
	Inv    int64  `json:"inv"`
	Resp   int64  `json:"resp"`
}

// History is the writes that may overlap one fork, and what its child saw.
type History struct {
	Writes []Write
	// Initial is each cell's value before its first write (missing: 0).
	Initial map[uint64]uint64
	// ForkInv and ForkResp bound the fork call in the parent.
	ForkInv, ForkResp int64
	// Snapshot is the value the child saw in each cell; cells the history
	// never writes are ignored.
	Snapshot map[uint64]uint64
}

// Result is three-valued; Unknown is never a pass.
type Result int

const (
	Ok Result = iota
	Violation
	Unknown
)

func (r Result) String() string {
	return [...]string{"ok", "violation", "unknown"}[r]
}

// Verdict is the outcome of a check.
type Verdict struct {
	Result Result
	// Cut is an instant at which the snapshot was taken (Ok only).
	Cut int64
	// Seen is the snapshot's write that forces the cut late (nil: the fork
	// call's start), Missed the unseen write that forces it early (nil: the
	// fork call's end). Both are set on a two-write violation.
	Seen, Missed *Write
	// Reason explains a violation or an Unknown in words.
	Reason string
}

const (
	negInf = math.MinInt64
	posInf = math.MaxInt64
)

// Check decides the history exactly when every cell has one writer whose
// writes do not overlap; otherwise it answers Unknown.
func Check(h *History) Verdict {
	if h.ForkInv > h.ForkResp {
		return Verdict{Result: Unknown, Reason: "fork interval is reversed"}
	}
	cells := byCell(h.Writes)
	lo, hi := h.ForkInv, h.ForkResp
	var seenW, missW *Write
	for c, ws := range cells {
		for i := 1; i < len(ws); i++ {
			if ws[i].Thread != ws[0].Thread || ws[i].Inv <= ws[i-1].Resp {
				return Verdict{Result: Unknown, Reason: fmt.Sprintf("cell %#x has concurrent writers; needs the general check", c)}
			}
		}
		v, ok := h.Snapshot[c]
		if !ok {
			continue
		}
		next := -1
		if v == h.Initial[c] {
			next = 0
		} else {
			for i := range ws {
				if ws[i].Value == v {
					next = i + 1
					if ws[i].Inv > lo {
						lo, seenW = ws[i].Inv, &ws[i]
					}
					break
				}
			}
			if next < 0 {
				return Verdict{Result: Violation, Reason: fmt.Sprintf("cell %#x holds %#x, which no write in the history wrote and is not its initial value %#x", c, v, h.Initial[c])}
			}
		}
		if next < len(ws) && ws[next].Resp < hi {
			hi, missW = ws[next].Resp, &ws[next]
		}
	}
	if lo <= hi {
		return Verdict{Result: Ok, Cut: lo}
	}
	return Verdict{Result: Violation, Seen: seenW, Missed: missW, Reason: explain(h, seenW, missW)}
}

func explain(h *History, seen, missed *Write) string {
	switch {
	case seen != nil && missed != nil && seen.Thread == missed.Thread:
		return fmt.Sprintf("thread t%d wrote %#x to cell %#x (done at %d) and then %#x to cell %#x (started at %d); the snapshot has the later write but not the earlier one",
			missed.Thread, missed.Value, missed.Cell, missed.Resp, seen.Value, seen.Cell, seen.Inv)
	case seen != nil && missed != nil:
		return fmt.Sprintf("the snapshot has %#x in cell %#x (t%d, started at %d) but not %#x in cell %#x (t%d, done at %d, earlier): no instant separates them",
			seen.Value, seen.Cell, seen.Thread, seen.Inv, missed.Value, missed.Cell, missed.Thread, missed.Resp)
	case seen != nil:
		return fmt.Sprintf("the snapshot has %#x in cell %#x, written by t%d starting at %d, after fork returned at %d",
			seen.Value, seen.Cell, seen.Thread, seen.Inv, h.ForkResp)
	case missed != nil:
		return fmt.Sprintf("the snapshot lacks %#x in cell %#x, written by t%d and done at %d, before fork was called at %d",
			missed.Value, missed.Cell, missed.Thread, missed.Resp, h.ForkInv)
	}
	return "no consistent cut"
}

// byCell groups writes by cell, each group sorted by invocation time.
func byCell(ws []Write) map[uint64][]Write {
	cells := make(map[uint64][]Write)
	for _, w := range ws {
		cells[w.Cell] = append(cells[w.Cell], w)
	}
	for _, g := range cells {
		sort.Slice(g, func(i, j int) bool { return g[i].Inv < g[j].Inv })
	}
	return cells
}

// Trim returns an equivalent, smaller history for the general check: per
// cell, writes that completed before the fork was called collapse into the
// initial value (all but the last), and writes that started after the fork
// returned are dropped unless the snapshot holds their value. It keeps
// every cell whole (no per-cell partitioning of the snapshot).
func Trim(h *History) *History {
	out := &History{Initial: make(map[uint64]uint64), ForkInv: h.ForkInv, ForkResp: h.ForkResp, Snapshot: h.Snapshot}
	for c, v := range h.Initial {
		out.Initial[c] = v
	}
	for c, ws := range byCell(h.Writes) {
		// Collapse the single-writer prefix of writes that completed before
		// the fork was called into the initial value, unless the snapshot
		// holds one of them (then keep from that write on, so the verdict
		// can name it).
		last := -1
		for i := range ws {
			if ws[i].Resp < h.ForkInv && !overlapsAny(ws, i) {
				last = i
			} else {
				break
			}
		}
		start := last + 1
		v, inSnap := h.Snapshot[c]
		for k := 0; k < last && inSnap; k++ {
			if ws[k].Value == v {
				start = k
				break
			}
		}
		if start > 0 {
			out.Initial[c] = ws[start-1].Value
		}
		for _, w := range ws[start:] {
			if w.Inv > h.ForkResp && !(inSnap && w.Value == v) {
				continue
			}
			out.Writes = append(out.Writes, w)
		}
	}
	return out
}

func overlapsAny(ws []Write, i int) bool {
	for j := range ws {
		if j != i && ws[j].Inv <= ws[i].Resp && ws[i].Inv <= ws[j].Resp {
			return true
		}
	}
	return false
}
