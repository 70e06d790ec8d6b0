package redis

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/checker/cut"
)

// Op is one SET: writer (0.. for the writer connections; the load counts
// as the key's owning writer), key index, unique value id, and the
// command's start (before it was sent) and end (its reply read), in ns
// since the scenario began.
type Op struct {
	Writer int    `json:"writer"`
	Key    int    `json:"key"`
	Val    uint64 `json:"val"`
	Inv    int64  `json:"inv"`
	Resp   int64  `json:"resp"`
	Load   bool   `json:"load,omitempty"`
}

// KeyName and Value are how keys and values look in Redis. Values are
// unique ids padded to size with 'x'.
func KeyName(k int) string { return fmt.Sprintf("k%07d", k) }

// Value renders value id v padded to size bytes.
func Value(v uint64, size int) string {
	s := strconv.FormatUint(v, 10) + ":"
	if len(s) < size {
		s += strings.Repeat("x", size-len(s))
	}
	return s
}

// ParseValue recovers the id of a value (ok false: not a value this
// scenario writes, or a damaged one).
func ParseValue(s string, size int) (uint64, bool) {
	id, pad, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(id, 10, 64)
	if err != nil || v == 0 {
		return 0, false
	}
	want := size - len(id) - 1
	if want < 0 {
		want = 0
	}
	if len(pad) != want || strings.Trim(pad, "x") != "" {
		return 0, false
	}
	return v, true
}

// Snapshot is what the RDB holds, as read back through a second
// redis-server: key index -> value id, and anything unexpected.
type Snapshot struct {
	Vals   map[int]uint64
	Extras []string // keys that are not the scenario's, or values that are not its values
}

// Finding is a snapshot that is not a consistent cut.
type Finding struct {
	Round         int
	Reason        string
	BgInv, BgResp int64
	Keys          []KeyTimeline
	Extras        []string
}

// KeyTimeline is one key's writes near the violation and what the
// snapshot holds for it.
type KeyTimeline struct {
	Key      string
	Snapshot string // "v<id>" or "(absent)"
	Writes   []Op
}

func (f *Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "BGSAVE round %d: the RDB is not a consistent cut of the writes at any instant of the BGSAVE call [%s, %s]: %s\n",
		f.Round, fmtT(f.BgInv), fmtT(f.BgResp), f.Reason)
	for _, e := range f.Extras {
		fmt.Fprintf(&b, "  unexpected: %s\n", e)
	}
	for _, k := range f.Keys {
		fmt.Fprintf(&b, "  key %s: the RDB holds %s; its writes:\n", k.Key, k.Snapshot)
		for _, w := range k.Writes {
			src := fmt.Sprintf("writer %d", w.Writer)
			if w.Load {
				src = "load"
			}
			fmt.Fprintf(&b, "    SET v%d  [%s, %s]  %s\n", w.Val, fmtT(w.Inv), fmtT(w.Resp), src)
		}
	}
	return b.String()
}

func fmtT(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) + "ms" }

// Check decides whether snap is a consistent cut of ops at an instant
// inside [bgInv, bgResp] (the BGSAVE call, which forks). Every key is
// written by one writer, one command at a time, so checker/cut decides it
// exactly; a key absent from the RDB counts as holding its initial
// (absent) value, so a key whose write completed before BGSAVE and is
// missing is a violation. It returns nil when the snapshot is consistent.
func Check(round, keys int, ops []Op, bgInv, bgResp int64, snap Snapshot) (*Finding, error) {
	f := &Finding{Round: round, BgInv: bgInv, BgResp: bgResp}
	if len(snap.Extras) > 0 {
		f.Extras = snap.Extras
		f.Reason = fmt.Sprintf("the RDB holds %d keys or values no write made", len(snap.Extras))
		return f, nil
	}
	h := &cut.History{Initial: map[uint64]uint64{}, Snapshot: map[uint64]uint64{}, ForkInv: bgInv, ForkResp: bgResp}
	for _, o := range ops {
		h.Writes = append(h.Writes, cut.Write{Thread: o.Writer, Cell: uint64(o.Key), Value: o.Val, Inv: o.Inv, Resp: o.Resp})
	}
	for k := 0; k < keys; k++ {
		h.Snapshot[uint64(k)] = snap.Vals[k] // 0 (absent) if missing
	}
	for k := range snap.Vals {
		if k < 0 || k >= keys {
			f.Reason = fmt.Sprintf("the RDB holds key %s, outside the scenario's %d keys", KeyName(k), keys)
			return f, nil
		}
	}
	v := cut.Check(h)
	switch v.Result {
	case cut.Ok:
		return nil, nil
	case cut.Unknown:
		return nil, fmt.Errorf("round %d: cut check undecided: %s", round, v.Reason)
	}
	f.Reason = explain(v, bgInv, bgResp)
	for _, w := range []*cut.Write{v.Seen, v.Missed} {
		if w != nil {
			f.Keys = append(f.Keys, timeline(int(w.Cell), ops, snap, bgInv, bgResp))
		}
	}
	if len(f.Keys) == 0 {
		// A value no write made: name the key.
		for k, val := range snap.Vals {
			found := false
			for _, o := range ops {
				if o.Key == k && o.Val == val {
					found = true
					break
				}
			}
			if !found {
				f.Keys = append(f.Keys, timeline(k, ops, snap, bgInv, bgResp))
				break
			}
		}
	}
	return f, nil
}

// timeline is key k's writes from the last one completed well before the
// BGSAVE call to the first few after it.
func timeline(k int, ops []Op, snap Snapshot, bgInv, bgResp int64) KeyTimeline {
	kt := KeyTimeline{Key: KeyName(k), Snapshot: "(absent)"}
	if v, ok := snap.Vals[k]; ok {
		kt.Snapshot = fmt.Sprintf("v%d", v)
	}
	var ws []Op
	for _, o := range ops {
		if o.Key == k {
			ws = append(ws, o)
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].Inv < ws[j].Inv })
	first := 0
	for i, o := range ws {
		if o.Resp < bgInv {
			first = i
		}
	}
	if first > 2 {
		first -= 2
	} else {
		first = 0
	}
	after := 0
	for _, o := range ws[first:] {
		kt.Writes = append(kt.Writes, o)
		if o.Inv > bgResp {
			after++
			if after >= 3 {
				break
			}
		}
	}
	return kt
}

// explain words a cut violation in keys, values and times.
func explain(v cut.Verdict, bgInv, bgResp int64) string {
	seen, missed := v.Seen, v.Missed
	switch {
	case seen != nil && missed != nil && seen.Thread == missed.Thread:
		return fmt.Sprintf("writer %d set %s = v%d (done at %s) and then %s = v%d (started at %s); the RDB has the later write but not the earlier one",
			missed.Thread, KeyName(int(missed.Cell)), missed.Value, fmtT(missed.Resp), KeyName(int(seen.Cell)), seen.Value, fmtT(seen.Inv))
	case seen != nil && missed != nil:
		return fmt.Sprintf("the RDB has %s = v%d (SET started at %s) but not %s = v%d (SET done at %s, earlier): no instant separates them",
			KeyName(int(seen.Cell)), seen.Value, fmtT(seen.Inv), KeyName(int(missed.Cell)), missed.Value, fmtT(missed.Resp))
	case seen != nil:
		return fmt.Sprintf("the RDB has %s = v%d, whose SET started at %s, after BGSAVE returned at %s",
			KeyName(int(seen.Cell)), seen.Value, fmtT(seen.Inv), fmtT(bgResp))
	case missed != nil:
		return fmt.Sprintf("the RDB lacks %s = v%d, whose SET was done at %s, before BGSAVE was called at %s",
			KeyName(int(missed.Cell)), missed.Value, fmtT(missed.Resp), fmtT(bgInv))
	}
	return v.Reason
}
