package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Mode is a fork implementation.
type Mode int

const (
	// Eager is Linux's default fork: copy every level, write-protect
	// private PTEs.
	Eager Mode = iota
	// OnDemand is On-demand-fork: share PTE tables copy-on-write.
	OnDemand
	// Async is Async-fork: the parent copies PGD/PUD and write-protects
	// its PMDs; the child's kernel thread copies PMD/PTE levels in the
	// background.
	Async
)

var modeNames = [...]string{"eager", "ondemand", "async"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode parses "eager", "ondemand" or "async".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown fork implementation %q (want eager, ondemand or async)", s)
}

// Config configures a simulated kernel.
type Config struct {
	Mode Mode
	// Mutant names a catalogued bug to switch on ("" for none).
	Mutant string
	// SchedSeed drives the scheduler that interleaves Async-fork's
	// background copy with the parent, and the choice of failing
	// allocations when FailRate is set. The same seed replays the same
	// interleaving exactly.
	SchedSeed uint64
	// FailNth makes the n-th page-table or VMA allocation of every fork
	// fail (1-based, counted from the fork call, including Async-fork's
	// background copy and the parent's proactive syncs). 0: never.
	FailNth int
	// FailRate is the probability that a fork gets a failing allocation
	// at a position drawn from the scheduler (ignored when FailNth > 0).
	FailRate float64
	// Kernel is the release (uname -r) whose behaviour the model follows
	// where Linux changed it ("" or unparsable: the latest the model
	// knows, 6.18). Only mremap differs so far: before 6.17 a fixed move
	// checks the source after it unmapped the destination and must stay
	// inside one VMA.
	Kernel string
	// Lacks names operation kinds the kernel being stood in for cannot do
	// (an anonname without CONFIG_ANON_VMA_NAME), with the executor's
	// reason: they are skipped as the executor skips them there.
	Lacks map[prog.OpKind]string
}

// kernelBefore reports whether the configured release is older than
// major.minor.
func (k *Kernel) kernelBefore(major, minor int) bool {
	var a, b int
	if n, _ := fmt.Sscanf(k.cfg.Kernel, "%d.%d", &a, &b); n != 2 {
		return false
	}
	return a < major || a == major && b < minor
}

// errNoMem is an injected allocation failure.
var errNoMem = errors.New("ENOMEM (injected)")

// allocCtx counts allocations made on behalf of one fork.
type allocCtx struct {
	n, failAt int
	failed    bool
}

// Kernel is one simulated machine running one program. It is not safe for
// concurrent use: every simulated thread (user processes, Async-fork's
// copier) runs on the caller's goroutine, interleaved by sched.
type Kernel struct {
	cfg   Config
	mut   mutantSet
	sched *rand.Rand
	// ctx is the fork whose allocations are being counted (nil: none;
	// allocations outside a fork never fail).
	ctx     *allocCtx
	mmSeq   int
	anonSeq int
	inoSeq  uint64
	// mmapBase is where the next kernel-placed mapping goes (top-down).
	mmapBase uint64
	events   []obs.Event
	// copies are the Async-fork copies in flight, oldest first.
	copies   []*asyncCopy
	injected []int
	main     *MM
	released bool
	// datas are the page contents this kernel allocated, returned to
	// dataPool by Release.
	datas []*[wordsPerPage]uint64
	// opGen counts operations (see VMA.splitGen).
	opGen int
	// Allocs counts every page-table and VMA allocation.
	Allocs int
}

// NewKernel returns a kernel; the mutant must be known for the mode.
func NewKernel(cfg Config) (*Kernel, error) {
	k := &Kernel{cfg: cfg, inoSeq: 1000}
	if cfg.Mutant != "" {
		m, ok := LookupMutant(cfg.Mutant)
		if !ok {
			return nil, fmt.Errorf("unknown mutant %q", cfg.Mutant)
		}
		if m.Mode != cfg.Mode {
			return nil, fmt.Errorf("mutant %q applies to --fork %v, not %v", m.Name, m.Mode, cfg.Mode)
		}
		k.mut = 1 << m.bit
	}
	k.sched = rand.New(rand.NewPCG(cfg.SchedSeed, 0x5eed))
	return k, nil
}

func (k *Kernel) alloc(what string) error {
	k.Allocs++
	c := k.ctx
	if c == nil || c.failAt <= 0 || c.failed {
		return nil
	}
	c.n++
	if c.n == c.failAt {
		c.failed = true
		return fmt.Errorf("%s: %w", what, errNoMem)
	}
	return nil
}

// newAllocCtx starts counting the allocations of a fork.
func (k *Kernel) newAllocCtx() *allocCtx {
	c := &allocCtx{}
	switch {
	case k.cfg.FailNth > 0:
		c.failAt = k.cfg.FailNth
	case k.cfg.FailRate > 0 && k.sched.Float64() < k.cfg.FailRate:
		c.failAt = 1 + k.sched.IntN(12)
	}
	return c
}

// event records something an oracle should see (a broken page-table
// invariant, an access that would hang, an injected failure) as a typed
// event of fork f (-1: none); checker.Check judges it.
func (k *Kernel) event(kind obs.EventKind, f int, format string, args ...any) {
	k.events = append(k.events, obs.ForkEvent(kind, f, "sim: "+format, args...))
}

// Injected lists the forks that got an injected allocation failure: the
// fork failed (ENOMEM) or, for Async-fork, its background copy failed and
// the child was killed.
func (k *Kernel) Injected() []int { return k.injected }

// Events returns the events recorded so far.
func (k *Kernel) Events() []obs.Event { return k.events }

func (k *Kernel) newFile(size uint64) *File {
	k.inoSeq++
	return &File{Ino: k.inoSeq, Size: size, pages: make(map[uint64]*Page)}
}

// pmdWriteProtectFault handles a write access under a present PMD whose RW
// bit is clear. It reports whether the access may go on.
func (k *Kernel) pmdWriteProtectFault(m *MM, a uint64, pe *PMDEntry) bool {
	switch k.cfg.Mode {
	case OnDemand:
		if pe.Table != nil {
			return m.breakTable(a&^pmdMask, pe)
		}
		pe.Flags |= PMDRW
		return true
	case Async:
		if len(m.copies) > 0 {
			k.syncPMD(m, m.copies[len(m.copies)-1], a&^pmdMask, a)
			if pe.rw() {
				return true
			}
		}
	}
	k.event(obs.EvWriteFaultHang, -1, "write fault at %#x in %v loops: its PMD is write-protected and no fork copy is in flight (the process would hang)", a, m)
	return false
}

// dataPool recycles page contents between runs: allocating and collecting
// 4 KiB arrays is most of a run's cost otherwise.
var dataPool = sync.Pool{New: func() any { return new([wordsPerPage]uint64) }}

func (k *Kernel) newData() *[wordsPerPage]uint64 {
	d := dataPool.Get().(*[wordsPerPage]uint64)
	k.datas = append(k.datas, d)
	return d
}

// Release gives the kernel's page contents back for reuse by later runs.
// The kernel (its page tables and pages) must not be used afterwards.
func (k *Kernel) Release() {
	for _, d := range k.datas {
		*d = [wordsPerPage]uint64{}
		dataPool.Put(d)
	}
	k.datas = nil
	k.released = true
}
