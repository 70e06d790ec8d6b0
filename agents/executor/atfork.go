package executor

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The page census around a fork of the main process (obs.ForkPages): how
// the kernel held the regions' resident pages just before the call
// (present, swapped, uffd-wp from /proc/self/pagemap; THP, KSM, mlocked
// from /proc/kpageflags when it is readable, i.e. as root) and just after
// it (mapped exclusively or shared with the child, pagemap bit 56). Main
// process, main thread only; it may use the Go runtime.

// Bits of a /proc/PID/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent   = 1 << 63
	pmSwapped   = 1 << 62
	pmUffdWP    = 1 << 57
	pmExclusive = 1 << 56
	pmPFN       = 1<<55 - 1
)

// Bits of a /proc/kpageflags entry.
const (
	kpfAnon    = 1 << 12
	kpfSwapBk  = 1 << 14
	kpfHuge    = 1 << 17
	kpfKSM     = 1 << 21
	kpfTHP     = 1 << 22
	kpfZero    = 1 << 24
	kpfMlocked = 1 << 33
)

// maxCensusPages bounds the pagemap entries one census reads (the arena's
// mapped pages beyond it are not counted; Err says so).
const maxCensusPages = 1 << 18

type pageCensus struct {
	pm, kpf *os.File
	pmErr   string
	buf     []byte
	pfns    []uint64
	cur     obs.ForkPages
	done    []obs.ForkPages
}

func (c *pageCensus) open() {
	if c.pm != nil || c.pmErr != "" {
		return
	}
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		c.pmErr = "pagemap: " + err.Error()
		return
	}
	c.pm = f
	if k, err := os.Open("/proc/kpageflags"); err == nil {
		c.kpf = k
	}
}

// scan reads the pagemap entries of every arena mapping and calls fn with
// each; it reports a reason when it could not read them all.
func (c *pageCensus) scan(m *machine, fn func(e uint64)) string {
	if c.pm == nil {
		return c.pmErr
	}
	if e := m.readMaps(); e != 0 {
		return "maps: " + unix.Errno(e).Error()
	}
	total := 0
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		lo, hi := max(v.start, arena.Base()), min(v.end, arena.End())
		if lo >= hi {
			continue
		}
		n := int((hi - lo) / prog.PageSize)
		if total+n > maxCensusPages {
			return "more than " + strconv.Itoa(maxCensusPages) + " mapped pages: counted the first"
		}
		total += n
		if cap(c.buf) < n*8 {
			c.buf = make([]byte, n*8)
		}
		b := c.buf[:n*8]
		if _, err := c.pm.ReadAt(b, int64(lo/prog.PageSize*8)); err != nil {
			return "pagemap: " + err.Error()
		}
		for k := 0; k < n; k++ {
			fn(binary.LittleEndian.Uint64(b[k*8:]))
		}
	}
	return ""
}

// before takes the census before fork f's call.
func (c *pageCensus) before(m *machine, f int) {
	c.open()
	c.cur = obs.ForkPages{Fork: f}
	c.pfns = c.pfns[:0]
	cur := &c.cur
	cur.Err = c.scan(m, func(e uint64) {
		switch {
		case e&pmPresent != 0:
			cur.Present++
			if pfn := e & pmPFN; pfn != 0 {
				c.pfns = append(c.pfns, pfn)
			}
		case e&pmSwapped != 0:
			cur.Swapped++
		}
		if e&pmUffdWP != 0 {
			cur.UffdWP++
		}
	})
	if c.kpf == nil || len(c.pfns) == 0 {
		return
	}
	cur.Flags = true
	// One read per run of consecutive PFNs (a THP is 512 of them) or of
	// one repeated PFN (the shared zeropage).
	var fb []byte
	for i := 0; i < len(c.pfns) && cur.Flags; {
		j, same := i+1, 0
		for j < len(c.pfns) && c.pfns[j] == c.pfns[i] {
			j++
		}
		if same = j - i; same == 1 {
			for j < len(c.pfns) && c.pfns[j] == c.pfns[j-1]+1 && j-i < 4096 {
				j++
			}
		}
		n := j - i
		if same > 1 {
			n = 1
		}
		fb = append(fb[:0], make([]byte, n*8)...)
		if _, err := c.kpf.ReadAt(fb, int64(c.pfns[i]*8)); err != nil {
			cur.Flags = false
			break
		}
		for k := 0; k < n; k++ {
			countFlags(cur, binary.LittleEndian.Uint64(fb[k*8:]), max(same, 1))
		}
		i = j
	}
	if cur.THP > 0 {
		cur.PMDMapped = arenaAnonHugePages()
	}
}

// countFlags counts n pages whose /proc/kpageflags entry is fl into cur.
func countFlags(cur *obs.ForkPages, fl uint64, n int) {
	switch {
	case fl&kpfZero != 0 && fl&kpfTHP != 0:
		cur.HugeZero += n
	case fl&kpfZero != 0:
		cur.Zero += n
	case fl&kpfHuge != 0:
		cur.Hugetlb += n
	case fl&kpfTHP != 0:
		cur.THP += n
	}
	if fl&(kpfAnon|kpfSwapBk|kpfZero|kpfHuge) == 0 {
		cur.File += n
	}
	if fl&kpfKSM != 0 {
		cur.KSM += n
	}
	if fl&kpfMlocked != 0 {
		cur.Mlocked += n
	}
}

// after completes the census after the call returned (ok: it created a
// child) and keeps it.
func (c *pageCensus) after(m *machine, ok bool) {
	if ok {
		cur := &c.cur
		if why := c.scan(m, func(e uint64) {
			if e&pmPresent == 0 {
				return
			}
			if e&pmExclusive != 0 {
				cur.Exclusive++
			} else {
				cur.Shared++
			}
		}); why != "" && cur.Err == "" {
			cur.Err = why
		}
	}
	c.done = append(c.done, c.cur)
}

// take returns the program's censuses and forgets them.
func (c *pageCensus) take() []obs.ForkPages {
	out := c.done
	c.done = nil
	return out
}

// arenaAnonHugePages returns the pages of the arena's mappings that
// /proc/self/smaps counts as AnonHugePages (PMD-mapped THP).
func arenaAnonHugePages() int {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0
	}
	in, kb := false, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.IndexByte(line, '-'); i > 0 && i < 17 && bytes.IndexByte(line[:i], ':') < 0 {
			if start, err := strconv.ParseUint(string(line[:i]), 16, 64); err == nil {
				in = start >= arena.Base() && start < arena.End()
				continue
			}
		}
		if in && bytes.HasPrefix(line, []byte("AnonHugePages:")) {
			f := bytes.Fields(line[len("AnonHugePages:"):])
			if len(f) > 0 {
				n, _ := strconv.Atoi(string(f[0]))
				kb += n
			}
		}
	}
	return kb / 4
}

// noKSM is set when the kernel has no KSM (MADV_MERGEABLE answers EINVAL):
// the executor skips the KSM advices rather than report an error the model
// does not predict.
var noKSM = func() bool {
	_, err := os.Stat("/sys/kernel/mm/ksm")
	return err != nil
}()
