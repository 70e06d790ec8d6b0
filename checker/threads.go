package checker

import (
	"bytes"
	"fmt"
	"time"

	"github.com/forkfuzz/forkfuzz/checker/cut"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Threads of the main process run concurrently with it, so the sequential
// model cannot say what a view holds in memory they touch. Instead:
//   - every slot a thread store can write is a "concurrent cell": the
//     sequential model does not judge its word (or its page's digest);
//   - a region that a thread changes VMAs of is not judged at all after the
//     main thread hands it that operation;
//   - for each fork of the main process, the child's start view restricted
//     to the concurrent cells must be a consistent cut of the threads'
//     timed stores (package cut), judged with the fork call's TSC bounds;
//   - except in pages an io_uring registration pinned before the fork: the
//     kernel copies a maybe-pinned anonymous page into the child during
//     the fork (copy_present_page, Linux 5.9+) while the parent's entry
//     stays writable, page after page, so a writer thread's stores race
//     the copy and no single instant need explain them all. There each
//     cell alone must hold a value it held at some instant of the fork
//     call (a value never there, or one overwritten before the fork began
//     or written after it returned, is still a finding).

// cellKey identifies a slot.
type cellKey struct {
	region int
	off    uint64
}

func (c cellKey) id() uint64 { return uint64(c.region)<<40 | c.off }

// concurrency summarizes what threads touch in a program.
type concurrency struct {
	cells map[cellKey]bool
	// vmaFrom[r] is the index of the first thread operation that changes
	// VMAs of region r (len(p.Ops) if none).
	vmaFrom []int
}

func threadOpCells(op *prog.Op, fn func(cellKey)) {
	for k := 0; k < op.Count; k++ {
		fn(cellKey{op.Region, op.Off + uint64(k)*op.Stride})
	}
}

func newConcurrency(p *prog.Program) *concurrency {
	c := &concurrency{cells: make(map[cellKey]bool), vmaFrom: make([]int, len(p.Regions))}
	for r := range c.vmaFrom {
		c.vmaFrom[r] = len(p.Ops)
	}
	for i := range p.Ops {
		op := &p.Ops[i]
		if op.Thread == 0 {
			continue
		}
		switch op.Kind {
		case prog.OpStore, prog.OpStoreLoop:
			threadOpCells(op, func(k cellKey) { c.cells[k] = true })
		case prog.OpPwrite:
			// Writes the file: every mapping of it may change.
			c.vmaFrom[op.Region] = min(c.vmaFrom[op.Region], i)
		default:
			if op.Kind.ChangesVMA() {
				c.vmaFrom[op.Region] = min(c.vmaFrom[op.Region], i)
				if op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 {
					c.vmaFrom[op.To] = min(c.vmaFrom[op.To], i)
				}
			}
		}
	}
	return c
}

// forkHistory is the history one child start view is judged against.
type forkHistory struct {
	fork, forkOp, view int
	h                  *cut.History
	region             map[uint64]int // cell id -> region
	// pinned holds one single-cell history per judged cell in a pinned
	// page (judged each alone; h leaves them out).
	pinned []*cut.History
}

// forkHistories builds, for every child start view of a fork of the main
// process, the threads' timed stores and what the child saw in the judged
// cells. A view that holds a judged cell's page by digest only (its
// words were not recorded) is left out and counted in missing.
func forkHistories(p *prog.Program, o *obs.Observation, c *concurrency) (out []forkHistory, missing int) {
	if len(o.Threads) == 0 {
		return nil, 0
	}
	var writes []cut.Write
	region := make(map[uint64]int)
	for _, tl := range o.Threads {
		for _, s := range tl.Stores {
			if s.Op < 0 || s.Op >= len(p.Ops) {
				continue
			}
			op := &p.Ops[s.Op]
			k := s.Slot % max(op.Count, 1)
			key := cellKey{op.Region, op.Off + uint64(k)*op.Stride}
			region[key.id()] = op.Region
			writes = append(writes, cut.Write{Thread: tl.Thread, Cell: key.id(), Value: s.Value, Inv: int64(s.Inv), Resp: int64(s.Resp)})
		}
	}
	judged := judgedCells(p, c)
	for vi := range o.Views {
		v := &o.Views[vi]
		if v.At != obs.AtStart || v.Proc < 1 {
			continue
		}
		f := v.Proc - 1
		fi := p.ForkOp(f)
		if fi < 0 || p.Ops[fi].Proc != 0 || o.Ops[fi].TSCStart == 0 {
			continue
		}
		h := &cut.History{
			Initial:  initialValues(p, fi, judged),
			ForkInv:  int64(o.Ops[fi].TSCStart),
			ForkResp: int64(o.Ops[fi].TSCEnd),
			Snapshot: make(map[uint64]uint64),
		}
		pinned := uringPinnedCells(p, fi, judged)
		single := make(map[uint64]*cut.History)
		for key := range pinned {
			single[key.id()] = &cut.History{Initial: map[uint64]uint64{key.id(): h.Initial[key.id()]},
				ForkInv: h.ForkInv, ForkResp: h.ForkResp, Snapshot: make(map[uint64]uint64)}
		}
		for _, w := range writes {
			key := cellKey{region[w.Cell], w.Cell & (1<<40 - 1)}
			switch {
			case pinned[key]:
				single[w.Cell].Writes = append(single[w.Cell].Writes, w)
			case judged[key]:
				h.Writes = append(h.Writes, w)
			}
		}
		words := make(map[cellKey]uint64, len(v.Words))
		for _, w := range v.Words {
			words[cellKey{w.Region, w.Off}] = w.Value
		}
		if v.Truncated && !wordsComplete(v, words, judged) {
			missing++
			continue
		}
		fh := forkHistory{fork: f, forkOp: fi, view: vi, h: h, region: region}
		for key := range judged {
			if v.StateAt(key.region, int(key.off/prog.PageSize)) != obs.Readable {
				continue
			}
			if sh := single[key.id()]; sh != nil {
				sh.Snapshot[key.id()] = words[key]
				fh.pinned = append(fh.pinned, sh)
			} else {
				h.Snapshot[key.id()] = words[key]
			}
		}
		out = append(out, fh)
	}
	return out, missing
}

// wordsComplete says whether view v, whose word list is not complete,
// holds every word of each page in which a judged cell is readable.
func wordsComplete(v *obs.View, words map[cellKey]uint64, judged map[cellKey]bool) bool {
	type pageKey struct{ region, page int }
	have := map[pageKey]int{}
	for k := range words {
		have[pageKey{k.region, int(k.off / prog.PageSize)}]++
	}
	nonzero := map[pageKey]int{}
	for _, d := range v.Pages {
		nonzero[pageKey{d.Region, d.Page}] = d.NonZero
	}
	for k := range judged {
		pk := pageKey{k.region, int(k.off / prog.PageSize)}
		if v.StateAt(k.region, pk.page) == obs.Readable && have[pk] != nonzero[pk] {
			return false
		}
	}
	return true
}

// cutFindings judges the child start views of the main process's forks
// against the threads' timed stores.
func cutFindings(p *prog.Program, o *obs.Observation, c *concurrency, timeout time.Duration) (out []Finding, missing int) {
	fhs, missing := forkHistories(p, o, c)
	for _, fh := range fhs {
		f, fi, vi, h, region := fh.fork, fh.forkOp, fh.view, fh.h, fh.region
		v := &o.Views[vi]
		if fd, bad := pinnedFinding(p, fh, v, timeout); bad {
			out = append(out, fd)
		}
		verdict := cut.Decide(h, timeout)
		if verdict.Result == cut.Ok {
			continue
		}
		kind := "no-cut"
		switch {
		case verdict.Result == cut.Unknown:
			kind = "unknown"
		case verdict.Seen != nil && verdict.Missed != nil && verdict.Seen.Thread == verdict.Missed.Thread:
			kind = "torn"
		case verdict.Seen != nil && verdict.Missed == nil:
			kind = "write-after-fork"
		case verdict.Missed != nil && verdict.Seen == nil:
			kind = "missing-write-before-fork"
		}
		reg := -1
		if verdict.Seen != nil {
			reg = region[verdict.Seen.Cell]
		} else if verdict.Missed != nil {
			reg = region[verdict.Missed.Cell]
		}
		rk := "memory"
		if reg >= 0 {
			rk = p.Regions[reg].Kind.String()
		}
		oracle := OracleLinearizability
		if verdict.Result == cut.Unknown {
			oracle = "linearizability-unknown"
		}
		out = append(out, Finding{Oracle: oracle, Signature: string(oracle) + ":" + kind + ":" + rk, Proc: v.Proc, View: vi, At: v.At, Op: fi, Region: reg,
			Explanation: fmt.Sprintf("start view of the child of f%d is not a consistent cut of the threads' stores during `%s` (TSC ticks; the fork call ran from %d to %d): %s",
				f, p.Ops[fi].String(), h.ForkInv, h.ForkResp, explainCut(p, verdict, region))})
	}
	return out, missing
}

// pinnedFinding judges the pinned cells of one child start view each
// alone, and returns a finding for the first that held no value it had
// during the fork call.
func pinnedFinding(p *prog.Program, fh forkHistory, v *obs.View, timeout time.Duration) (Finding, bool) {
	for _, sh := range fh.pinned {
		// Decide: several threads may write the cell (porcupine then).
		verdict := cut.Decide(sh, timeout)
		if verdict.Result == cut.Ok {
			continue
		}
		oracle, sig := OracleLinearizability, "pinned-copy"
		if verdict.Result == cut.Unknown {
			oracle, sig = "linearizability-unknown", "pinned-copy-unknown"
		}
		var cell uint64
		for c := range sh.Snapshot {
			cell = c
		}
		reg := int(cell >> 40) // cellKey.id
		return Finding{Oracle: oracle, Signature: string(oracle) + ":" + sig + ":" + p.Regions[reg].Kind.String(),
			Proc: v.Proc, View: fh.view, At: v.At, Op: fh.forkOp, Region: reg,
			Explanation: fmt.Sprintf("start view of the child of f%d: r%d+%#x is in a page an io_uring registration pinned, which the kernel copies into the child during `%s` (TSC %d..%d), but the child holds %#x there, a value the parent's word did not hold at any instant of the fork call: %s",
				fh.fork, reg, cell&(1<<40-1), p.Ops[fh.forkOp].String(), sh.ForkInv, sh.ForkResp, sh.Snapshot[cell], explainCut(p, verdict, fh.region))}, true
	}
	return Finding{}, false
}

// LinearizabilityHTML returns porcupine's HTML visualization of every fork
// whose child's snapshot is not a consistent cut of the threads' stores,
// keyed by a file name ("linearizability-f0.html"). The history is trimmed
// to what can matter (cut.Trim) so porcupine can show it.
func LinearizabilityHTML(p *prog.Program, o *obs.Observation, timeout time.Duration) map[string][]byte {
	out := make(map[string][]byte)
	fhs, _ := forkHistories(p, o, newConcurrency(p))
	for _, fh := range fhs {
		if cut.Check(fh.h).Result == cut.Ok {
			continue
		}
		_, model, info := cut.Porcupine(cut.Trim(fh.h), timeout)
		var b bytes.Buffer
		if cut.Visualize(model, info, &b) == nil {
			out[fmt.Sprintf("linearizability-f%d.html", fh.fork)] = b.Bytes()
		}
	}
	return out
}

// uringPinnedCells are the judged cells in pages that an io_uring registration
// of the main process, before fork operation forkOp, pinned (every
// registration so far: counting a replaced one too only loosens the check
// of its cells).
func uringPinnedCells(p *prog.Program, forkOp int, judged map[cellKey]bool) map[cellKey]bool {
	pinned := make(map[cellKey]bool)
	for i := 0; i < forkOp; i++ {
		op := &p.Ops[i]
		if op.Proc != 0 || op.Kind != prog.OpUringReg {
			continue
		}
		lo, hi := op.Off&^(prog.PageSize-1), op.Off+op.Len
		for key := range judged {
			if key.region == op.Region && key.off >= lo && key.off < hi {
				pinned[key] = true
			}
		}
	}
	return pinned
}

// judgedCells are the concurrent cells the cut check judges: in private
// regions whose VMAs no thread changes, never written by the main
// process's main thread or a pwrite once a thread has written them.
func judgedCells(p *prog.Program, c *concurrency) map[cellKey]bool {
	judged := make(map[cellKey]bool)
	for key := range c.cells {
		if !p.Regions[key.region].Kind.Shared() && c.vmaFrom[key.region] == len(p.Ops) {
			judged[key] = true
		}
	}
	// The main thread's later stores race with the threads: drop those cells.
	firstThread := make(map[cellKey]int)
	for i := range p.Ops {
		op := &p.Ops[i]
		switch {
		case op.Thread > 0 && (op.Kind == prog.OpStore || op.Kind == prog.OpStoreLoop):
			threadOpCells(op, func(k cellKey) {
				if _, ok := firstThread[k]; !ok {
					firstThread[k] = i
				}
			})
		case op.Thread == 0 && (op.Kind == prog.OpStore || op.Kind == prog.OpPwrite || op.Kind.ChangesVMA()):
			if op.Kind == prog.OpStore || op.Kind == prog.OpPwrite {
				threadOpCells(op, func(k cellKey) {
					if _, ok := firstThread[k]; ok || op.Kind == prog.OpPwrite {
						delete(judged, k)
					}
				})
			}
			if op.Kind.ChangesVMA() {
				for key := range judged {
					if key.region == op.Region || (op.Kind == prog.OpMremap && op.Flags&prog.MremapFixed != 0 && key.region == op.To) {
						delete(judged, key)
					}
				}
			}
		}
	}
	// Writes outside the threads' timed logs (GUP writes, O_DIRECT and
	// fixed reads, in any process) make a cell's value at a fork unknown
	// to the history: those cells are not judged.
	for i := range p.Ops {
		op := &p.Ops[i]
		switch op.Kind {
		case prog.OpProcMem, prog.OpPVWrite:
			threadOpCells(op, func(k cellKey) { delete(judged, k) })
		case prog.OpODirect, prog.OpUringRead:
			for key := range judged {
				if key.region == op.Region && key.off >= op.Off && key.off < op.Off+op.Len {
					delete(judged, key)
				}
			}
		}
	}
	return judged
}

// initialValues are the judged cells' values before any thread wrote them:
// the last main-thread store before the fork's first thread write.
func initialValues(p *prog.Program, forkOp int, judged map[cellKey]bool) map[uint64]uint64 {
	init := make(map[uint64]uint64)
	for i := 0; i < forkOp; i++ {
		op := &p.Ops[i]
		if op.Proc != 0 || op.Thread != 0 || op.Kind != prog.OpStore {
			continue
		}
		k := 0
		op.SlotOffsets(func(_ int, off uint64) {
			if key := (cellKey{op.Region, off}); judged[key] {
				init[key.id()] = prog.SlotValue(i, k)
			}
			k++
		})
	}
	return init
}

// explainCut words a cut verdict with regions, offsets and the operations
// that wrote the values.
func explainCut(p *prog.Program, v cut.Verdict, region map[uint64]int) string {
	desc := func(w *cut.Write) string {
		where := fmt.Sprintf("r%d+%#x", region[w.Cell], w.Cell&(1<<40-1))
		if op, k, ok := prog.DecodeSlotValue(w.Value); ok && op < len(p.Ops) {
			return fmt.Sprintf("%#x (write %d of op %d `%s`) to %s", w.Value, k, op, p.Ops[op].String(), where)
		}
		return fmt.Sprintf("%#x to %s", w.Value, where)
	}
	switch s, m := v.Seen, v.Missed; {
	case s != nil && m != nil && s.Thread == m.Thread:
		return fmt.Sprintf("thread t%d wrote %s, done at %d, and then %s, started at %d; the snapshot has the later write but not the earlier one",
			m.Thread, desc(m), m.Resp, desc(s), s.Inv)
	case s != nil && m != nil:
		return fmt.Sprintf("the snapshot has %s by t%d (started at %d) but not %s by t%d (done at %d, earlier): no instant separates them",
			desc(s), s.Thread, s.Inv, desc(m), m.Thread, m.Resp)
	case s != nil:
		return fmt.Sprintf("the snapshot has %s by t%d, started at %d, after fork returned", desc(s), s.Thread, s.Inv)
	case m != nil:
		return fmt.Sprintf("the snapshot lacks %s by t%d, done at %d, before fork was called", desc(m), m.Thread, m.Resp)
	}
	return v.Reason
}
