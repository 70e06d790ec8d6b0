package checker

// The comparisons the model asks for at single operations: a result the
// model could not put as an errno prediction (an address, a byte count,
// a wait status, a refused slot count, a spliced word). The model decides
// what it expected; these write the finding.

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// notRun: operation i of pr has no result although its process ran
// (later: operations of pr after it did run).
func (c *comparer) notRun(pr *proc, i int, later bool) {
	if c.o.Truncated {
		return
	}
	kind := c.p.Ops[i].Kind.String()
	sig := "errno:not-run:" + kind
	what := "did not run although its process was running"
	switch {
	case later:
		sig = "errno:no-record:" + kind
		what = "has no result although later operations of the same process ran"
	case pr.id > 0:
		what += " (the child stopped here: see its exit status)"
	default:
		what += " (the main process stopped here)"
	}
	c.col.add(Finding{Oracle: OracleErrno, Signature: sig, Proc: pr.id, View: -1, Op: i, Region: -1,
		Explanation: fmt.Sprintf("%s: %s %s", procName(pr.id), opRef(c.p, i), what)})
}

// address: call (mmap, mremap) operation i of pr returned an address the
// model does not allow; what says which and why.
func (c *comparer) address(pr *proc, i, region int, call, what string) {
	c.col.add(Finding{Oracle: OracleErrno, Signature: "errno:" + call + "-address", Proc: pr.id, View: -1, Op: i, Region: region,
		Explanation: fmt.Sprintf("%s: %s %s", procName(pr.id), opRef(c.p, i), what)})
}

// refusedSlots: the kernel refused got of operation i's slots into
// target, the model expected want (rule).
func (c *comparer) refusedSlots(pr, target *proc, i, got, want int, rule string) {
	c.col.add(Finding{Oracle: OracleSkipped, Signature: "skipped:" + c.m.opSig(i), Proc: pr.id, View: -1, Op: i, Region: c.p.Ops[i].Region,
		Explanation: fmt.Sprintf("%s: the kernel refused %d slots of %s into %s, the model expects %d: %s",
			procName(pr.id), got, opRef(c.p, i), procName(target.id), want, rule)})
}

// byteCount: operation i returned got bytes, the model wants want.
func (c *comparer) byteCount(pr *proc, i int, got, want uint64) {
	c.col.add(Finding{Oracle: OracleErrno, Signature: "ret:" + c.m.opSig(i), Proc: pr.id, View: -1, Op: i, Region: c.m.regionOf(i),
		Explanation: fmt.Sprintf("%s: %s returned %d bytes, expected %d", procName(pr.id), opRef(c.p, i), got, want)})
}

// advisedBytes: process_madvise operation i advised got bytes of its
// one iovec of want.
func (c *comparer) advisedBytes(pr *proc, i int, got, want uint64) {
	c.col.add(Finding{Oracle: OracleErrno, Signature: "errno:pmadvise-bytes", Proc: pr.id, View: -1, Op: i, Region: c.p.Ops[i].Region,
		Explanation: fmt.Sprintf("%s: %s returned %d bytes advised, the whole iovec is %d", procName(pr.id), opRef(c.p, i), got, want)})
}

// pipeWordOutside: read-pipe operation i reported a word at off, beyond
// the n bytes it read.
func (c *comparer) pipeWordOutside(pr *proc, i int, off, n uint64) {
	c.col.add(Finding{Oracle: OracleObservation, Signature: "observation:readpipe-data", Proc: pr.id, View: -1, Op: i, Region: -1,
		Explanation: fmt.Sprintf("%s reported a word at offset %#x, beyond the %d bytes it read", opRef(c.p, i), off, n)})
}

// pipeRead compares the words read-pipe operation i of pr read (data,
// want bytes in all) with what the model says each spliced page held.
func (c *comparer) pipeRead(pr *proc, i int, pages []pipePage, data []obs.Word, want uint64) {
	got := make([]map[uint16]uint64, len(pages))
	for _, d := range data {
		p := int(d.Off / prog.PageSize)
		if p >= len(pages) || d.Off%prog.SlotSize != 0 {
			c.pipeWordOutside(pr, i, d.Off, want)
			return
		}
		if got[p] == nil {
			got[p] = map[uint16]uint64{}
		}
		got[p][uint16(d.Off%prog.PageSize/prog.SlotSize)] = d.Value
	}
	for p, pp := range pages {
		if pp.unknown {
			continue
		}
		seen := map[uint16]bool{}
		check := func(w uint16) {
			if seen[w] {
				return
			}
			seen[w] = true
			if v := got[p][w]; !c.m.pipeAccepts(&pp, w, v, i) {
				c.pipeWord(pr, i, &pp, p, w, v)
			}
		}
		for w := range got[p] {
			check(w)
		}
		for _, a := range pp.alts {
			for _, x := range a {
				check(x.k)
			}
		}
	}
}

// pipeWord: operation i of pr read v at word w of pipe page p, which
// pp spliced; the model allows only pp's alternatives.
func (c *comparer) pipeWord(pr *proc, i int, pp *pipePage, p int, w uint16, v uint64) {
	region, page := regionOf(pp.g)
	what, sig := fmt.Sprintf("%#x", v), "unexpected-value"
	if j, _, ok := prog.DecodeSlotValue(v); ok && j < len(c.p.Ops) {
		what = fmt.Sprintf("%#x, written by %s in %s", v, opRef(c.p, j), procName(c.p.Ops[j].Proc))
		if c.p.Ops[j].Proc != pp.proc {
			sig = "foreign-write"
		}
	} else if v == 0 {
		sig = "lost-content"
	}
	var was []string
	for _, a := range pp.alts {
		was = append(was, fmt.Sprintf("%#x", a.get(w)))
	}
	if len(was) == 0 {
		was = []string{"0x0"}
	}
	c.col.add(Finding{Oracle: OraclePipe, Signature: "pipe:vmsplice-" + sig + ":" + c.p.Regions[region].Kind.String(), Proc: pr.id, View: -1, Op: i,
		Region: region, Page: page, Off: uint64(page)*prog.PageSize + uint64(w)*prog.SlotSize,
		Explanation: fmt.Sprintf("%s: %s read page %d of the pipe, which %s spliced from r%d page %d at %s; its word at %#x is %s, but it held %v then, and only %s's own later writes (or writes to a shared page) may show through the pipe",
			procName(pr.id), opRef(c.p, i), p, procName(pp.proc), region, page, opRef(c.p, pp.op), uint64(w)*prog.SlotSize, what, was, procName(pp.proc))})
}

// killedChildRan: the child of fork f was killed before it ran (wait
// operation i reaped it); none of its operations may have run.
func (c *comparer) killedChildRan(child *proc, f int) {
	for j := range c.p.Ops {
		if c.p.Ops[j].Proc == child.id && c.o.Ops[j].Ran {
			c.col.add(Finding{Oracle: OracleChildExit, Signature: "child-exit:killed-child-ran", Proc: child.id, View: -1, Op: j, Region: -1,
				Explanation: fmt.Sprintf("%s was %s, yet %s ran", procName(child.id), c.m.killedHow(f), opRef(c.p, j))})
			return
		}
	}
}

// killedStatus: wait operation i reported status for a child killed with
// SIGKILL before it ran.
func (c *comparer) killedStatus(child *proc, i int, status uint64) {
	c.col.add(Finding{Oracle: OracleChildExit, Signature: "child-exit:killed-" + statusClass(status), Proc: child.id, View: -1, Op: i, Region: -1,
		Explanation: fmt.Sprintf("%s was killed with SIGKILL before it ran, but %s reports wait status %#x (%s); a killed child never runs, so only SIGKILL is possible",
			procName(child.id), opRef(c.p, i), status, statusString(status))})
}

// childStatus: wait operation i reported status for a child that ran and
// was not killed.
func (c *comparer) childStatus(child *proc, i int, status uint64) {
	c.col.add(Finding{Oracle: OracleChildExit, Signature: "child-exit:" + statusClass(status), Proc: child.id, View: -1, Op: i, Region: -1,
		Explanation: fmt.Sprintf("%s ended with wait status %#x (%s) reported by %s; a child that was not killed must exit with status 0",
			procName(child.id), status, statusString(status), opRef(c.p, i))})
}
