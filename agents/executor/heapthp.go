package executor

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"golang.org/x/sys/unix"
)

// The executor's own large anonymous memory (Go heap arenas, buffers) on
// transparent huge pages: every fork of the main process copies the page
// tables of what it maps, one PTE per 4 KiB (copy_pte_range, about a
// million KCOV PCs per fork under the reference kernel), or one PMD per
// 2 MiB for a huge page (copy_huge_pmd). MADV_DONTFORK is no option:
// children run Go code in the forked executor (internal/childsafe).
// Opt-in (Options.HeapTHP) until it is shown to pay: docs/throughput.md.

// hugeSize is the size of a PMD-mapped transparent huge page on amd64.
const hugeSize = 2 << 20

// madvCollapse is MADV_COLLAPSE (Linux 6.1): collapse a range into huge
// pages synchronously. Older kernels answer EINVAL.
const madvCollapse = 25

// heapMapping is one anonymous read-write private mapping.
type heapMapping struct{ start, end uint64 }

// heapMappings returns the anonymous read-write private mappings of a
// /proc/PID/maps text that can hold at least one aligned huge page and
// lie outside both program arenas (fuzz/prog: ArenaTop and ArenaLow),
// clipped to whole huge pages.
func heapMappings(maps []byte) []heapMapping {
	var out []heapMapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		// address perms offset dev inode [path]
		if len(f) < 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		if len(f) > 5 && !bytes.HasPrefix(f[5], []byte("[anon:")) {
			continue // [stack], [heap], [vvar], a file; "[anon: Go: heap]" is anonymous
		}
		dash := bytes.IndexByte(f[0], '-')
		if dash < 0 {
			continue
		}
		s, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
		e, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			continue
		}
		if inArena(s, e) {
			continue
		}
		s = (s + hugeSize - 1) &^ (hugeSize - 1)
		e &^= hugeSize - 1
		if e > s {
			out = append(out, heapMapping{s, e})
		}
	}
	return out
}

// inArena reports whether [s, e) overlaps either program arena.
func inArena(s, e uint64) bool {
	for _, a := range []prog.Arena{prog.ArenaTop, prog.ArenaLow} {
		if s < a.End() && e > a.Base() {
			return true
		}
	}
	return false
}

// heapTHP is the outcome of the last heapOnHugePages.
type heapTHP struct {
	mappings, bytes     uint64
	adviseErr, collapse error
}

var lastHeapTHP heapTHP

// heapOnHugePages advises the executor's heap mappings MADV_HUGEPAGE and
// collapses them (MADV_COLLAPSE) into huge pages. Called after the heap
// is trimmed, so that trimming cannot split what was just collapsed; an
// error (an old kernel, THP "never") is recorded, never fatal.
func heapOnHugePages() heapTHP {
	var r heapTHP
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		r.adviseErr = err
		return r
	}
	for _, m := range heapMappings(maps) {
		r.mappings++
		r.bytes += m.end - m.start
		if err := madvise(m.start, m.end-m.start, unix.MADV_HUGEPAGE); err != nil && r.adviseErr == nil {
			r.adviseErr = err
		}
		// EINVAL (no MADV_COLLAPSE), EAGAIN/ENOMEM (no huge page free
		// now): the range stays as it is.
		if err := madvise(m.start, m.end-m.start, madvCollapse); err != nil && r.collapse == nil {
			r.collapse = err
		}
	}
	lastHeapTHP = r
	return r
}
