package executor

// Fork-implementation profiles (Options.ForkImpl): the executor process,
// and so every process of the program, forks with an implementation other
// than the kernel's stock fork. Only this process is switched: whoever
// started it (forkfuzz, the guest agent, go-plugin's host side) keeps
// stock fork. Note that the executor's own Go runtime (its threads, heap
// and stacks) is part of every mm the kernel copies.
//
// A profile is data: the knob whose presence says the kernel has the
// implementation, and the steps that switch it on for this process. It is
// applied only where its knob exists; a missing knob is a harness error.
//
// Evidence (ForkEvidence in fuzz/obs): around every fork of the main
// process the executor holds the child off the CPU (it pins itself to
// its current CPU, runs SCHED_FIFO with SCHED_RESET_ON_FORK, and the child
// inherits the one-CPU mask) until it has read /proc/self/pagemap: a
// private probe page it wrote right before the fork is shared with the
// child after an eager fork and still the parent's alone while the
// child's page-table copy is pending. Then the child gets the executor's
// CPU mask back and the executor returns to SCHED_OTHER. The kernel's own
// counters (the 6.1 port's /sys/module/async_fork/parameters/stats) are
// deliberately not used: vendor kernels do not have them.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents/forkimpl"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The profiles live in agents/forkimpl (C reproducers emit them too).
type (
	ForkImplProfile = forkimpl.Profile
	ForkImplStep    = forkimpl.Step
)

// ForkImplProfiles are the known profiles (forkimpl.Profiles).
var ForkImplProfiles = forkimpl.Profiles

// ForkImplNames lists the profile names.
func ForkImplNames() []string { return forkimpl.Names() }

// LookupForkImpl returns the named profile.
func LookupForkImpl(name string) (*ForkImplProfile, error) { return forkimpl.Lookup(name) }

// AvailableForkImpls lists the profiles whose knob exists on the running
// kernel (stock always).
func AvailableForkImpls() []string {
	var out []string
	for _, p := range ForkImplProfiles {
		if p.Knob == "" {
			out = append(out, p.Name)
			continue
		}
		if _, err := os.Stat(p.Knob); err == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// applyForkImpl switches the executor process to profile name and says
// what it did. Main process only.
func applyForkImpl(name string) ([]string, error) {
	p, err := LookupForkImpl(name)
	if err != nil {
		return nil, err
	}
	if p.Knob != "" {
		if _, err := os.Stat(p.Knob); err != nil {
			return nil, fmt.Errorf("fork implementation %s: this kernel does not have it (no %s)", name, p.Knob)
		}
	}
	var did []string
	for _, s := range p.Steps {
		switch s.Kind {
		case "memcg":
			if s.IfPresent {
				if _, err := os.Stat(filepath.Join(cgroupRoot, s.Path)); err != nil {
					continue
				}
			}
			dir, err := memcgDir()
			if err != nil {
				return did, fmt.Errorf("fork implementation %s: %w", name, err)
			}
			f := filepath.Join(dir, s.Path)
			if err := os.WriteFile(f, []byte(s.Value), 0); err != nil {
				return did, fmt.Errorf("fork implementation %s: write %s=%s: %w", name, f, s.Value, err)
			}
			back, err := os.ReadFile(f)
			if err != nil || strings.TrimSpace(string(back)) != s.Value {
				return did, fmt.Errorf("fork implementation %s: %s reads back %q (%v) after writing %s", name, f, strings.TrimSpace(string(back)), err, s.Value)
			}
			did = append(did, fmt.Sprintf("%s=%s (read back)", f, s.Value))
		case "write":
			path := strings.Replace(s.Path, "/proc/self/", fmt.Sprintf("/proc/%d/", os.Getpid()), 1)
			if _, err := os.Stat(path); err != nil {
				if s.IfPresent {
					continue
				}
				return did, fmt.Errorf("fork implementation %s: %w", name, err)
			}
			if err := os.WriteFile(path, []byte(s.Value), 0); err != nil {
				return did, fmt.Errorf("fork implementation %s: write %s=%s: %w", name, path, s.Value, err)
			}
			did = append(did, fmt.Sprintf("%s=%s", path, s.Value))
		case "prctl":
			var a [5]uintptr
			copy(a[:], s.Args)
			if _, _, e := unix.Syscall6(unix.SYS_PRCTL, a[0], a[1], a[2], a[3], a[4], 0); e != 0 {
				return did, fmt.Errorf("fork implementation %s: prctl%v: %w", name, s.Args, e)
			}
			did = append(did, fmt.Sprintf("prctl%v", s.Args))
		default:
			return did, fmt.Errorf("fork implementation %s: unknown step kind %q", name, s.Kind)
		}
	}
	if len(did) == 0 {
		did = append(did, "no fork-implementation knob on this kernel: stock fork")
	}
	return did, nil
}

// Pagemap bits (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmapPresent   = 1 << 63
	pmapFile      = 1 << 61 // file page or shared anonymous
	pmapExclusive = 1 << 56 // page mapped by exactly one process
)

// forkEv is the evidence machinery of one executor. Main process only.
type forkEv struct {
	on      bool
	pagemap int
	probe   uintptr // first page of a private 2 MiB VMA of its own, outside the arena
	orig    unix.CPUSet
	one     unix.CPUSet
	fifo    bool // SCHED_FIFO worked this fork
	pinned  bool // the affinity pin worked this fork
	pinErr  string
	pm      *[512]uint64 // a MAP_SHARED page
	stamp   uint64
	forks   []obs.ForkEvidence
	applied []string
	profile string
	pmdMod  bool
	pmdPath []byte // NUL-terminated paths of the module's files, for raw opens
	pidPath []byte
	pmdBuf  []byte           // a MAP_SHARED buffer the PMD table is read into
	last    int              // index in forks of the latest fork, -1 if none
	cur     obs.ForkEvidence // between look and release
	curRan  string
}

// pmdBufSize bounds the PMD table read right after a fork (a line per
// PMD the process's VMAs cover, about 17 bytes each).
const pmdBufSize = 1 << 20

// init opens what the evidence needs, once per executor.
func (e *forkEv) init() error {
	if e.probe != 0 {
		return nil
	}
	fd, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fork-implementation evidence: %w", err)
	}
	// The probe is a 2 MiB-aligned VMA of exactly one PMD, kept out of
	// THP: Async-fork defers only PMDs a VMA covers in full (partly
	// covered ones are copied in the parent's fast path).
	const pmdSize = 2 << 20
	raw, errno := sysMmap(0, 2*pmdSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE, -1, 0)
	if errno != 0 {
		unix.Close(fd)
		return fmt.Errorf("fork-implementation evidence: map probe: %w", unix.Errno(errno))
	}
	probe := (raw + pmdSize - 1) &^ (pmdSize - 1)
	if probe > raw {
		sysMunmap(raw, probe-raw)
	}
	if end := raw + 2*pmdSize; end > probe+pmdSize {
		sysMunmap(probe+pmdSize, end-probe-pmdSize)
	}
	if _, errno := sys3(unix.SYS_MADVISE, probe, pmdSize, unix.MADV_NOHUGEPAGE); errno != 0 {
		unix.Close(fd)
		return fmt.Errorf("fork-implementation evidence: probe: madvise nohugepage: %w", unix.Errno(errno))
	}
	store64(probe, 1)
	// Pagemap entries are read into a MAP_SHARED page: fork neither
	// write-protects nor defers it, so the read never faults in the
	// parent (a fault could sleep and let the child run and copy).
	buf, err := unix.Mmap(-1, 0, int(prog.PageSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("fork-implementation evidence: map pagemap buffer: %w", err)
	}
	buf[0] = 1
	e.pm = (*[512]uint64)(unsafe.Pointer(&buf[0]))
	e.pagemap, e.probe = fd, probe
	if err := unix.SchedGetaffinity(0, &e.orig); err != nil {
		return fmt.Errorf("fork-implementation evidence: sched_getaffinity: %w", err)
	}
	if _, err := os.Stat(pmdTableFile); err == nil {
		b, err := unix.Mmap(-1, 0, pmdBufSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("fork-implementation evidence: map PMD table buffer: %w", err)
		}
		for i := 0; i < len(b); i += int(prog.PageSize) {
			b[i] = 0 // fault every page in now, not right after a fork
		}
		e.pmdBuf, e.pmdMod = b, true
		e.pmdPath = append([]byte(pmdTableFile), 0)
		e.pidPath = append([]byte(pmdPidFile), 0)
	}
	return nil
}

// wpPMDs counts the parent's write-protected table PMDs over the arena
// through the forkfuzz_pmd module, -1 if it cannot. Like childRanRaw it
// neither allocates nor touches the Go heap for writing: right after a
// fork, an allocation can fault or wait for the garbage collector, and a
// parent that blocks lets the held-off child run and copy.
func (e *forkEv) wpPMDs() int {
	b := e.pmdBuf
	// The module's target: this process's pid, written as decimal.
	var d [20]byte
	k := len(d)
	for v := unix.Getpid(); ; v /= 10 {
		k--
		d[k] = byte('0' + v%10)
		if v < 10 {
			break
		}
	}
	n := copy(b, d[k:])
	fd, errno := rawSyscall6(unix.SYS_OPENAT, ^uintptr(99) /* AT_FDCWD */, uintptr(unsafe.Pointer(&e.pidPath[0])), unix.O_WRONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return -1
	}
	_, errno = rawSyscall6(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(n), 0, 0, 0)
	rawSyscall6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
	if errno != 0 {
		return -1
	}
	fd, errno = rawSyscall6(unix.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&e.pmdPath[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return -1
	}
	defer rawSyscall6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
	n = 0
	for n < len(b) {
		r, errno := rawSyscall6(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), 0, 0, 0)
		if errno != 0 {
			return -1
		}
		if r == 0 {
			break
		}
		n += int(r)
	}
	if n == len(b) {
		return -1 // truncated
	}
	return countWPPMDs(b[:n], arena.Base(), arena.End())
}

// countWPPMDs counts, in the module's table (see ParsePMDs), the present,
// write-protected, non-huge entries with lo <= ADDR < hi, without
// allocating; -1 if a line is malformed.
func countWPPMDs(b []byte, lo, hi uint64) int {
	wp := 0
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		line := b[:i]
		if i < len(b) {
			i++
		}
		b = b[i:]
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var addr uint64
		j := 0
		for ; j < len(line) && line[j] != ' '; j++ {
			c := line[j]
			switch {
			case c >= '0' && c <= '9':
				addr = addr<<4 | uint64(c-'0')
			case c >= 'a' && c <= 'f':
				addr = addr<<4 | uint64(c-'a'+10)
			default:
				return -1
			}
		}
		if j == 0 || j > 16 || len(line) != j+4 {
			return -1
		}
		f := line[j+1:]
		if (f[0] != 'p' && f[0] != '-') || (f[1] != 'w' && f[1] != '-') || (f[2] != 'h' && f[2] != '-') {
			return -1
		}
		if addr >= lo && addr < hi && f[0] == 'p' && f[1] == '-' && f[2] == '-' {
			wp++
		}
	}
	return wp
}

// start prepares one run.
func (e *forkEv) start(profile string, noEvidence bool) error {
	e.forks, e.applied, e.profile, e.on, e.last = nil, nil, profile, false, -1
	if profile == "" {
		return nil
	}
	did, err := applyForkImpl(profile)
	e.applied = did
	if err != nil {
		return err
	}
	if noEvidence {
		e.applied = append(e.applied, "no evidence taken (test only): children were not held off the CPU")
		return nil
	}
	if err := e.init(); err != nil {
		return err
	}
	e.on = true
	return nil
}

type schedParam struct{ prio int32 }

// before runs right before a fork of the main process: it makes the probe
// page the parent's alone (a write; copy-on-write breaks any sharing
// with an earlier child) and holds children off this CPU.
func (e *forkEv) before() {
	e.stamp++
	store64(e.probe, e.stamp|1<<62)
	e.fifo, e.pinned, e.pinErr = false, false, ""
	var cpu uint32
	if _, errno := sys3(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); errno != 0 {
		e.pinErr = "getcpu: " + unix.Errno(errno).Error()
		return
	}
	e.one.Zero()
	e.one.Set(int(cpu))
	if err := unix.SchedSetaffinity(0, &e.one); err != nil {
		e.pinErr = "sched_setaffinity: " + err.Error()
		return
	}
	e.pinned = true
	p := schedParam{prio: 1}
	if _, errno := sys3(unix.SYS_SCHED_SETSCHEDULER, 0, unix.SCHED_FIFO|unix.SCHED_RESET_ON_FORK, uintptr(unsafe.Pointer(&p))); errno != 0 {
		e.pinErr = "sched_setscheduler SCHED_FIFO: " + unix.Errno(errno).Error()
		return
	}
	e.fifo = true
}

// after runs in the parent right after fork f (operation i) returned pid:
// it reads the evidence, then lets the child run anywhere.
func (e *forkEv) after(m *machine, i, f int, pid int, errno uintptr) {
	e.look(m, i, f, pid, errno)
	e.release(pid, errno)
}

// look reads the evidence of fork f (operation i) while the child is
// still held off the CPU; release, later, lets it go and records the
// verdict. Whatever the parent does between them (the page census) comes
// after the evidence, which a blocking parent would spoil.
func (e *forkEv) look(m *machine, i, f int, pid int, errno uintptr) {
	ev := obs.ForkEvidence{Fork: f, Op: i, PMDsWP: -1, PMDsWPAfterWait: -1, Pinned: e.fifo}
	ran := ""
	if errno == 0 {
		ev.Probe = e.probeState()
		// Whether the child ran, read right after the probe (it only
		// matters whether it ran before the probe was read) and without
		// allocating: reading it after the region pages, with
		// os.ReadFile, gave the parent time and reasons to block (a
		// stock fork write-protects the whole Go heap) and made stock
		// forks "unknown".
		ran = e.childRanRaw(pid)
		if m.p.Ops[i].Hold > 0 {
			// The counts read pagemap (and the module the page
			// tables), which can block the parent and let a held
			// child run: a hold keeps the verdict, not the counts.
			ev.Late = "page and PMD counts not taken: the fork holds its child (hold), and reading them can block the parent"
			e.cur, e.curRan = ev, ran
			return
		}
		ev.Pages, ev.Exclusive = e.regionPages(m.p)
		if e.pmdMod {
			ev.PMDsWP = e.wpPMDs()
		}
		// The counts above are the parent's state before the child's
		// copy only if the child still has not run: the parent can
		// block while reading them (the module takes the mmap lock,
		// which a runtime thread's mmap may be waiting for).
		if ran == "" {
			if late := e.childRanRaw(pid); late != "" {
				ev.Late = "the child ran while the counts were read (" + late + "): they may include its copy"
			}
		}
	}
	e.cur, e.curRan = ev, ran
}

// release lets the child of the fork look examined run anywhere, and
// records the fork's verdict.
func (e *forkEv) release(pid int, errno uintptr) {
	ev, ran := e.cur, e.curRan
	if e.fifo {
		p := schedParam{}
		sys3(unix.SYS_SCHED_SETSCHEDULER, 0, schedOther, uintptr(unsafe.Pointer(&p)))
	}
	if e.pinned {
		if errno == 0 {
			unix.SchedSetaffinity(pid, &e.orig)
		}
		unix.SchedSetaffinity(0, &e.orig)
	}
	switch {
	case errno != 0:
		e.last = -1
		return // a failed fork has no child to defer to: no evidence either way
	case ev.Probe == "exclusive":
		ev.Verdict = obs.EvDeferred
	case ev.Probe == "shared" && e.fifo && ran != "":
		// The parent blocked (a fault or the mmap lock: a thread was
		// changing mappings) and the child ran: it may have copied.
		ev.Verdict, ev.Why = obs.EvUnknown, "the child ran before the evidence was read ("+ran+"): it may have copied already"
	case ev.Probe == "shared" && e.fifo:
		ev.Verdict = obs.EvEager
	case ev.Probe == "shared":
		ev.Verdict, ev.Why = obs.EvUnknown, "the child was not held off the CPU ("+e.pinErr+"): it may have copied already"
	default:
		ev.Verdict, ev.Why = obs.EvUnknown, "probe page: "+ev.Probe
	}
	e.forks = append(e.forks, ev)
	e.last = len(e.forks) - 1
}

// waited runs in the main process right after operation i reaped the
// child of fork f: if that was the latest fork, no page-table copy can be
// in flight, and no PMD of the arena may still be write-protected.
func (e *forkEv) waited(i, f int) {
	if e.last < 0 || e.forks[e.last].Fork != f || !e.pmdMod {
		return
	}
	src, pmds := readPMDs()
	if strings.HasPrefix(src, "absent") {
		return
	}
	ev := &e.forks[e.last]
	ev.PMDsWPAfterWait, ev.AtWait = 0, i
	for _, p := range pmds {
		if p.Present && !p.Huge && !p.RW {
			ev.PMDsWPAfterWait++
			ev.WPAfterWait = append(ev.WPAfterWait, p.Addr)
		}
	}
}

func (e *forkEv) probeState() string {
	off := int64(e.probe/uintptr(prog.PageSize)) * 8
	n, errno := rawSyscall6(unix.SYS_PREAD64, uintptr(e.pagemap), uintptr(unsafe.Pointer(&e.pm[0])), 8, uintptr(off), 0, 0)
	if errno != 0 || n != 8 {
		return fmt.Sprintf("pagemap read failed (%d bytes, %v)", n, unix.Errno(errno))
	}
	w := e.pm[:1]
	switch {
	case w[0]&pmapPresent == 0:
		return "not present"
	case w[0]&pmapExclusive != 0:
		return "exclusive"
	}
	return "shared"
}

// childRanRaw says whether the child has been on a CPU (its schedstat
// timeslice count), "" if not or if it cannot tell. It does not allocate
// (an allocation right after a stock fork can fault, grow the heap under
// the mmap lock and sleep): the path and the read go through the
// MAP_SHARED evidence page, past the part probeState uses; the
// description is built only when the child ran.
func (e *forkEv) childRanRaw(pid int) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e.pm[0])), len(e.pm)*8)[2048:]
	n := copy(b, "/proc/")
	var d [20]byte
	k := len(d)
	for v := pid; ; v /= 10 {
		k--
		d[k] = byte('0' + v%10)
		if v < 10 {
			break
		}
	}
	n += copy(b[n:], d[k:])
	n += copy(b[n:], "/schedstat\x00")
	fd, errno := rawSyscall6(unix.SYS_OPENAT, ^uintptr(99) /* AT_FDCWD, -100 */, uintptr(unsafe.Pointer(&b[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return ""
	}
	rb := b[n : n+128]
	r, errno := rawSyscall6(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&rb[0])), uintptr(len(rb)), 0, 0, 0)
	rawSyscall6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
	if errno != 0 || int(r) <= 0 || int(r) > len(rb) {
		return ""
	}
	st := rb[:r]
	// "run_ns wait_ns timeslices\n": the child ran if timeslices != 0.
	field, start := 0, 0
	for i := 0; i <= len(st); i++ {
		if i < len(st) && st[i] != ' ' && st[i] != '\n' {
			continue
		}
		if i > start {
			if field == 2 {
				if string(st[start:i]) == "0" {
					return ""
				}
				return "schedstat " + strings.TrimSpace(string(st))
			}
			field++
		}
		start = i + 1
	}
	return ""
}

// regionPages counts the present private anonymous pages of the
// program's regions (the first 4096 pages of each) and those mapped by
// the parent alone.
func (e *forkEv) regionPages(p *prog.Program) (pages, excl int) {
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&e.pm[0])), len(e.pm)*8)
	for r := range p.Regions {
		base := arena.RegionBase(r) / prog.PageSize
		for first := uint64(0); first < 4096 && first < prog.SpanPages; first += uint64(len(e.pm)) {
			n, err := unix.Pread(e.pagemap, buf, int64(base+first)*8)
			if err != nil || n <= 0 {
				break
			}
			for _, w := range e.pm[:n/8] {
				if w&pmapPresent != 0 && w&pmapFile == 0 {
					pages++
					if w&pmapExclusive != 0 {
						excl++
					}
				}
			}
		}
	}
	return pages, excl
}

// result is the run's ForkImpl record.
func (e *forkEv) result() *obs.ForkImpl {
	if e.profile == "" {
		return nil
	}
	fs := append([]obs.ForkEvidence(nil), e.forks...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Op < fs[j].Op })
	return &obs.ForkImpl{Profile: e.profile, Applied: e.applied, Forks: fs}
}

// ForkImplKnobs describes, for a boot report, which fork-implementation
// knobs the running kernel has.
func ForkImplKnobs() string {
	var parts []string
	for _, p := range ForkImplProfiles {
		if p.Knob == "" {
			continue
		}
		st := "absent"
		if _, err := os.Stat(p.Knob); err == nil {
			st = "present"
			if b, err := os.ReadFile(p.Knob); err == nil {
				st += " (" + strings.TrimSpace(string(b)) + ")"
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			st = err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s: %s %s", p.Name, p.Knob, st))
	}
	return strings.Join(parts, "; ")
}

// schedOther is SCHED_OTHER (SCHED_NORMAL).
const schedOther = 0
