package executor

// The rollback measurements before and after a fork with an injected
// failure: children, arena maps, a content digest, page-table counters and
// the PMD table of the forkfuzz_pmd module (split from failnth.go). Main
// executor process only.

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func (m *machine) measureBefore(rb *obs.Rollback) {
	rb.ChildrenBefore = threadChildren()
	rb.MapsBefore = arenaMaps()
	if m.threadsRemap() {
		rb.MemoryNote = "not measured: threads of the program may change mappings meanwhile, so touching memory could fault"
	} else {
		rb.DigestBefore, rb.PagesBefore = m.contentDigest()
		rb.BaselineFaults, _, _ = m.writePass(rb, "before")
	}
	rb.PageTablesBefore, rb.VmPTEBefore = pageTableCounters()
	rb.OthersVmPTEBefore, _, rb.OthersMeasured = descendantsVmPTE()
	if n := otherProcesses(); n > quietProcesses {
		// PageTables is a machine-wide counter: with other processes
		// running (the host, not a forkfuzz VM) it moves for reasons of
		// its own and a leak cannot be told from noise.
		rb.PageTablesBefore = -1
		rb.PageTablesNote = fmt.Sprintf("not measured: %d other user processes share the machine-wide PageTables counter (a forkfuzz VM has %d at most)", n, quietProcesses)
	}
	rb.PMDSource, rb.PMDBefore = readPMDs()
	rb.VMAsBefore, rb.VMAsBelowArena = processVMAs()
}

// processVMAs counts the main process's VMAs, and those below the arena
// (dup_mmap copies VMAs in address order, so only those come before the
// program's regions in the order of fork's failure points).
func processVMAs() (all, below int) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		lo, _, ok := strings.Cut(line, "-")
		if !ok {
			continue
		}
		all++
		if a, err := strconv.ParseUint(lo, 16, 64); err == nil && a < arena.Base() {
			below++
		}
	}
	return all, below
}

// threadsRemap reports whether a thread of the program changes mappings:
// the main thread's digests and write passes could then fault on memory
// a thread unmaps under them.
func (m *machine) threadsRemap() bool {
	for i := range m.p.Ops {
		if op := &m.p.Ops[i]; op.Thread > 0 && op.Kind.ChangesVMA() {
			return true
		}
	}
	return false
}

// quietProcesses is how many user processes besides the executor and its
// children a machine may run for PageTables to be judged: in a forkfuzz
// VM, the init and the agent.
const quietProcesses = 4

// otherProcesses counts user processes (a non-empty cmdline: not kernel
// threads) other than this one and its descendants (the program's
// processes, whose page tables are measured separately).
func otherProcesses() int {
	me := os.Getpid()
	kids := map[int]bool{}
	for _, c := range threadChildren() {
		kids[c] = true
	}
	_, desc, _ := descendantsVmPTE()
	for _, c := range desc {
		kids[c] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 1 << 30
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me || kids[pid] {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && len(b) > 0 {
			n++
		}
	}
	return n
}

// measureAfter takes the "after" measurements; the order matters: page
// tables and PMD flags before anything touches memory (a write would make
// an Async-fork kernel synchronize and restore the RW bit, hiding the
// bug), content before the write pass.
func (m *machine) measureAfter(rb *obs.Rollback, at int) {
	rb.At = at
	rb.Comparable = m.comparable(rb)
	rb.ChildrenAfter = threadChildren()
	rb.PageTablesAfter, rb.VmPTEAfter = pageTableCounters()
	var okAfter bool
	rb.OthersVmPTEAfter, rb.OthersAfter, okAfter = descendantsVmPTE()
	rb.OthersMeasured = rb.OthersMeasured && okAfter
	if rb.PageTablesBefore < 0 {
		rb.PageTablesAfter = -1
	}
	for try := 1; try < pageTableTries && rb.PageTablesBefore >= 0 && leakKB(rb) > 0; try++ {
		// Other processes allocate and free page tables too: a leak is
		// what stays, so look again a few times and keep the smallest.
		time.Sleep(20 * time.Millisecond)
		pt, pte := pageTableCounters()
		others, pids, ok := descendantsVmPTE()
		if pt-pte-others < rb.PageTablesAfter-rb.VmPTEAfter-rb.OthersVmPTEAfter {
			rb.PageTablesAfter, rb.VmPTEAfter = pt, pte
			rb.OthersVmPTEAfter, rb.OthersAfter = others, pids
			rb.OthersMeasured = rb.OthersMeasured && ok
		}
	}
	_, rb.PMDAfter = readPMDs()
	rb.MapsAfter = arenaMaps()
	if rb.MemoryNote == "" {
		rb.DigestAfter, rb.PagesAfter = m.contentDigest()
		if m.rb.corrupt == "rollback-write-hang" {
			m.trapFirstPage()
		}
		rb.Faults, rb.WritePages, rb.PassNanos = m.writePass(rb, "after")
	}
	m.rb.done = append(m.rb.done, *rb)
}

func leakKB(rb *obs.Rollback) int64 {
	return (rb.PageTablesAfter - rb.PageTablesBefore) - (rb.VmPTEAfter - rb.VmPTEBefore) - (rb.OthersVmPTEAfter - rb.OthersVmPTEBefore)
}

// descendantsVmPTE sums VmPTE (kB) over every descendant of this process
// (the program's other processes: children of any thread, their
// children), and lists their pids. A process without an mm (a zombie)
// counts 0. ok is false when /proc could not be walked.
func descendantsVmPTE() (kb int64, pids []int, ok bool) {
	queue := []int{os.Getpid()}
	seen := map[int]bool{os.Getpid(): true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			if pid == os.Getpid() {
				return 0, nil, false
			}
			continue // exited meanwhile
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
			if err != nil {
				if pid == os.Getpid() && os.IsNotExist(err) {
					return 0, nil, false // no CONFIG_PROC_CHILDREN
				}
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && !seen[c] {
					seen[c] = true
					queue = append(queue, c)
					pids = append(pids, c)
				}
			}
		}
	}
	for _, c := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(c) + "/status"); err == nil {
			if v := kbField(b, "VmPTE:"); v > 0 {
				kb += v
			}
		}
	}
	sort.Ints(pids)
	return kb, pids, true
}

// comparable reports whether nothing but the fork, a kill of its child
// and its wait ran between the two measurements, and no thread of the
// main process can write meanwhile: then maps and content must not change.
func (m *machine) comparable(rb *obs.Rollback) bool {
	for _, op := range m.p.Ops {
		if op.Thread > 0 {
			return false
		}
	}
	for j := rb.Op + 1; j < rb.At; j++ {
		op := &m.p.Ops[j]
		if op.Proc == 0 && !(op.Kind == prog.OpKill && op.Fork == rb.Fork) {
			return false
		}
	}
	if rb.Errno == 0 {
		// The child ran its operations unless it was killed first (or
		// died before user space: childfail).
		killed := rb.CopyKilled()
		for j := rb.Op + 1; j < rb.At; j++ {
			if m.p.Ops[j].Kind == prog.OpKill && m.p.Ops[j].Fork == rb.Fork {
				killed = true
			}
		}
		if !killed {
			return false
		}
	}
	return true
}

// contentDigest sums obs.WordDigest(address, value) over every non-zero
// word of every readable page of the arena.
func (m *machine) contentDigest() (uint64, int) {
	if m.readMaps() != 0 {
		return 0, 0
	}
	var d uint64
	pages := 0
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		if v.end <= arena.Base() || v.start >= arena.End() {
			continue
		}
		for addr := max(v.start, arena.Base()); addr < min(v.end, arena.End()); addr += prog.PageSize {
			if m.pageState(&v, addr) != obs.Readable {
				continue
			}
			copyPage(&m.rb.digest, uintptr(addr))
			for w, val := range m.rb.digest {
				if val != 0 {
					d += obs.WordDigest(arena.Canonical(addr+uint64(w*8)), val)
				}
			}
			pages++
		}
	}
	return d, pages
}

// threadChildren lists the children of the calling thread
// (/proc/thread-self/children, CONFIG_PROC_CHILDREN), sorted; nil if the
// file cannot be read.
func threadChildren() []int {
	b, err := os.ReadFile("/proc/thread-self/children")
	if err != nil {
		return nil
	}
	out := []int{}
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// pageTableCounters returns PageTables from /proc/meminfo and this
// process's VmPTE from /proc/self/status, in kB, after folding the per-CPU
// vmstat deltas into the global counters (a write to
// /proc/sys/vm/stat_refresh; without it /proc/meminfo lags by up to the
// per-CPU thresholds). Values are -1 when unknown.
func pageTableCounters() (pageTables, vmPTE int64) {
	exact := os.WriteFile(statRefresh, []byte("1"), 0) == nil
	pageTables, vmPTE = -1, -1
	if b, err := os.ReadFile("/proc/meminfo"); err == nil && exact {
		pageTables = kbField(b, "PageTables:")
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		vmPTE = kbField(b, "VmPTE:")
	}
	return pageTables, vmPTE
}

func kbField(b []byte, key string) int64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := strings.Fields(string(rest))
			if len(f) > 0 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// readPMDs reads this process's PMD entries inside the arena from the
// forkfuzz_pmd module (kernel/pmdmod). source says where they came from,
// or starts with "absent:" and says why there are none.
func readPMDs() (source string, pmds []obs.PMDEntry) {
	if _, err := os.Stat(pmdTableFile); err != nil {
		return "absent: no " + pmdTableFile + " (the forkfuzz_pmd module is not loaded); only the behavioural checks apply", nil
	}
	if err := os.WriteFile(pmdPidFile, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return "absent: " + err.Error(), nil
	}
	b, err := os.ReadFile(pmdTableFile)
	if err != nil {
		return "absent: " + err.Error(), nil
	}
	pmds, err = ParsePMDs(b)
	if err != nil {
		return "absent: " + err.Error(), nil
	}
	var in []obs.PMDEntry
	for _, e := range pmds {
		if e.Addr >= arena.Base() && e.Addr < arena.End() {
			e.Addr = arena.Canonical(e.Addr)
			in = append(in, e)
		}
	}
	return "module " + pmdTableFile, in
}

// ParsePMDs parses the forkfuzz_pmd module's table: one line per PMD
// entry, "ADDR FLAGS" with ADDR in hex and FLAGS three characters, 'p' or
// '-' (present), 'w' or '-' (RW), 'h' or '-' (huge), e.g.
// "3f0000000000 pw-". Lines starting with '#' are comments.
func ParsePMDs(b []byte) ([]obs.PMDEntry, error) {
	var out []obs.PMDEntry
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) != 3 {
			return nil, fmt.Errorf("pmd table line %d: %q: want \"ADDR FLAGS\"", n+1, line)
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("pmd table line %d: bad address %q", n+1, f[0])
		}
		fl := f[1]
		bit := func(i int, c byte) (bool, error) {
			switch fl[i] {
			case c:
				return true, nil
			case '-':
				return false, nil
			}
			return false, fmt.Errorf("pmd table line %d: bad flags %q", n+1, fl)
		}
		var e obs.PMDEntry
		e.Addr = addr
		if e.Present, err = bit(0, 'p'); err != nil {
			return nil, err
		}
		if e.RW, err = bit(1, 'w'); err != nil {
			return nil, err
		}
		if e.Huge, err = bit(2, 'h'); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
