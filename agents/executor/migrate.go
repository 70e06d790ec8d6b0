package executor

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Page migration (migrate, migrateloop): move_pages(2) moves each page of
// the range to the next NUMA node with memory. While a page moves, its PTE
// is a migration entry, which a concurrent fork copies as a non-present
// entry (copy_nonpresent_pte: a writable entry must become readable in
// both processes). The contents do not change: the model treats migration
// as a no-op on memory, so any difference the oracles see afterwards is the
// kernel's.

// numaNodes are the NUMA nodes with memory (/sys/devices/system/node/
// has_memory); with fewer than two, migrate and migrateloop are skipped
// (obs.SkipNoNUMA) rather than run as a no-op that looks like coverage.
var numaNodes = func() []int32 {
	b, err := os.ReadFile("/sys/devices/system/node/has_memory")
	if err != nil {
		return nil
	}
	return parseNodeList(strings.TrimSpace(string(b)))
}()

// parseNodeList parses a kernel node list ("0", "0-1", "0,2-3"); a
// malformed list yields what parsed before the error.
func parseNodeList(s string) []int32 {
	var nodes []int32
	if s == "" {
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nodes
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1024 {
				return nodes
			}
		}
		for n := a; n <= b; n++ {
			nodes = append(nodes, int32(n))
		}
	}
	return nodes
}

// migrateBuf holds move_pages' arrays: fixed size in the machine, so a
// forked child (which runs without the Go runtime) never allocates.
type migrateBuf struct {
	pages  [prog.MaxMigratePages]uintptr
	nodes  [prog.MaxMigratePages]int32
	status [prog.MaxMigratePages]int32
}

// migrateChunk is how many pages a migrateloop pass after the first moves
// per move_pages call. A call first isolates its pages, each under
// mmap_lock (a fork that takes the lock then holds the mover off until it
// returns, and meets no page mid-move), then migrates them without the
// lock (6.1.192's migrate_pages_batch: unmap the batch, leaving migration
// entries, copy, remap). Small calls keep the isolation phases short, so
// a fork mostly arrives while pages are mid-move; later passes also skip
// the placement query (which holds mmap_lock over the whole range) and
// take each page's node from the last move's status.
const migrateChunk = 16

// moveAllRefused is set once move_pages refused MPOL_MF_MOVE_ALL (EPERM).
var moveAllRefused atomic.Bool

// maxMovePasses bounds the passes of a thread's migrateloops that are
// logged (a pass over 512 pages takes milliseconds under TCG).
const maxMovePasses = 1 << 14

// migrateLoop runs a migrateloop on its thread: pass after pass, each
// moving every page of the range to the next node (after the first pass in
// calls of migrateChunk pages), until the main thread
// has executed the wait of op.Fork. started is called after the first pass
// (the main thread waits for it before it goes on, so the loop is running
// at the fork). The result is the first errno a pass met (the loop stops
// there) and the number of page moves over all passes.
func (w *worker) migrateLoop(i int, started func()) {
	m := w.m
	op := &m.p.Ops[i]
	start := m.now()
	if len(numaNodes) < 2 {
		m.recSkip(i, obs.SkipNoNUMA, uintptr(unix.ENODEV))
		started()
		m.recOp(i, 0, 0, start, m.now(), 0)
		return
	}
	if !m.th.noSpread {
		defer w.spread()()
	}
	var moved uint64
	var errno uintptr
	// The pass log is grown now: an allocation during the fork would
	// wait for fork's mmap_lock (see storeloop).
	w.log.Moves = slices.Grow(w.log.Moves, maxMovePasses)
	m.kc.cut(m.ks, 0) // the harness's setup above
	pages := int(op.Len / prog.PageSize)
	for pass := 0; pass == 0 || !m.th.stop[op.Fork].Load(); pass++ {
		inv := rdtscp()
		var e uintptr
		var n uint64
		if pass == 0 {
			e, n = m.migrate(op)
		} else {
			for lo := 0; lo < pages && e == 0; lo += migrateChunk {
				var k uint64
				e, k = m.moveNext(lo, min(lo+migrateChunk, pages))
				n += k
				m.kc.drainHalf(m.ks)
			}
		}
		if len(w.log.Moves) < cap(w.log.Moves) {
			w.log.Moves = append(w.log.Moves, obs.TimedMove{Op: i, Pages: int(n), Inv: inv, Resp: rdtscp()})
		}
		moved += n
		if pass == 0 {
			started()
		}
		if e != 0 {
			errno = e
			break
		}
	}
	m.recOp(i, errno, moved, start, m.now(), 0)
}
