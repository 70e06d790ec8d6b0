package cut

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model of memory + fork: the state maps cells to values; a
// write sets a cell; a fork's output is the child's snapshot, legal iff it
// equals the state on every cell the history writes. The model is not
// partitioned by cell: a snapshot is checked whole.

type writeIn struct{ cell, value uint64 }

type forkIn struct{}

type memState map[uint64]uint64

func model(cells map[uint64]bool, initial map[uint64]uint64) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} {
			s := make(memState, len(cells))
			for c := range cells {
				s[c] = initial[c]
			}
			return s
		},
		Step: func(state, input, output interface{}) (bool, interface{}) {
			s := state.(memState)
			switch in := input.(type) {
			case writeIn:
				n := make(memState, len(s))
				for c, v := range s {
					n[c] = v
				}
				n[in.cell] = in.value
				return true, n
			case forkIn:
				snap := output.(map[uint64]uint64)
				for c, v := range s {
					if sv, ok := snap[c]; ok && sv != v {
						return false, s
					}
				}
				return true, s
			}
			return false, s
		},
		Equal: func(a, b interface{}) bool {
			x, y := a.(memState), b.(memState)
			if len(x) != len(y) {
				return false
			}
			for c, v := range x {
				if y[c] != v {
					return false
				}
			}
			return true
		},
		DescribeOperation: func(input, output interface{}) string {
			switch in := input.(type) {
			case writeIn:
				return fmt.Sprintf("write %#x := %#x", in.cell, in.value)
			case forkIn:
				return "fork (snapshot " + describe(output.(map[uint64]uint64), cells) + ")"
			}
			return "?"
		},
		DescribeState: func(state interface{}) string { return describe(state.(memState), cells) },
	}
}

func describe(m map[uint64]uint64, cells map[uint64]bool) string {
	var keys []uint64
	for c := range m {
		if cells[c] {
			keys = append(keys, c)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var parts []string
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%#x=%#x", c, m[c]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// Porcupine decides the history with porcupine's general search, within
// timeout (0: none). A timeout gives Unknown, never Ok. The returned info
// feeds Visualize.
func Porcupine(h *History, timeout time.Duration) (Verdict, porcupine.Model, porcupine.LinearizationInfo) {
	cells := make(map[uint64]bool)
	maxThread := 0
	ops := make([]porcupine.Operation, 0, len(h.Writes)+1)
	for _, w := range h.Writes {
		cells[w.Cell] = true
		maxThread = max(maxThread, w.Thread)
		ops = append(ops, porcupine.Operation{ClientId: w.Thread, Input: writeIn{w.Cell, w.Value}, Call: w.Inv, Return: w.Resp})
	}
	snap := make(map[uint64]uint64)
	for c, v := range h.Snapshot {
		if cells[c] {
			snap[c] = v
		}
	}
	ops = append(ops, porcupine.Operation{ClientId: maxThread + 1, Input: forkIn{}, Output: snap, Call: h.ForkInv, Return: h.ForkResp})
	m := model(cells, h.Initial)
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	switch res {
	case porcupine.Ok:
		return Verdict{Result: Ok}, m, info
	case porcupine.Illegal:
		return Verdict{Result: Violation, Reason: "porcupine: the writes and the snapshot have no linearization"}, m, info
	}
	return Verdict{Result: Unknown, Reason: fmt.Sprintf("porcupine: no answer within %v", timeout)}, m, info
}

// Visualize writes porcupine's HTML view of a checked history.
func Visualize(m porcupine.Model, info porcupine.LinearizationInfo, w io.Writer) error {
	return porcupine.Visualize(m, info, w)
}

// Decide runs the exact check and falls back to porcupine on the trimmed
// history where the exact check cannot decide (in a memory-capped worker
// after UseIsolated).
func Decide(h *History, timeout time.Duration) Verdict {
	v := Check(h)
	if v.Result != Unknown {
		return v
	}
	pv := porcupineFallback(Trim(h), timeout)
	if pv.Result == Unknown {
		pv.Reason = v.Reason + "; " + pv.Reason
	}
	return pv
}
