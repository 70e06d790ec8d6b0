package executor

import (
	"encoding/binary"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Sizes of the executor's fixed buffers.
const (
	mapsBufSize  = 8 << 20
	maxVMAs      = 1 << 16
	maxObjs      = 4096
	ctlSize      = workOff + 4096 // per-fork words, then work counters (child_spent.go)
	defaultWords = 1 << 18        // non-zero words per view
)

// arena is the placement of the program running now: one program runs at a
// time in a process (its arena is a fixed range of addresses), and the run
// sets it before it maps the regions. Every real address the executor
// reports goes through arena.Canonical.
var arena prog.Arena

// vma is one parsed line of /proc/self/maps.
type vma struct {
	start, end, off, inode uint64
	prot                   uint64 // obs.VMA* bits
	dev                    uint64 // major<<32 | minor, as /proc/self/maps shows it
}

// obj is a shared backing object (memfd, shmem or a regular file) and its
// size. An inode number names it only with its device: a tmpfs file, an
// ext4 file and a memfd may have the same number.
type obj struct{ dev, inode, size uint64 }

// machine is the interpreter state of one program. It is allocated in full
// before the program starts; forked children use it as their own copy.
//
// Forked children run the methods of the child_*.go files
// (//forkfuzz:childsafe, doc.go): in a child only fixed-size arrays and
// integer fields change, no Go pointer is written (a write barrier may be
// on in the copied runtime state).
type machine struct {
	p    *prog.Program
	rep  []byte // shared report buffer (MAP_SHARED): header + records
	ctl  []byte // shared control words: release flag per fork
	maps []byte // /proc/self/maps contents

	nvma int
	// vmas is allocated apart and never copied whole, so only the entries
	// a parse wrote are resident: every fork copies the page tables of
	// the executor's resident memory.
	vmas  *[maxVMAs]vma
	nobj  int
	objs  [maxObjs]obj
	memfd [prog.MaxRegions]int
	pids  [prog.MaxForks]int

	proc     int  // process running this copy: 0 main, I+1 child of fI
	inChild  bool // set in forked children
	ks       int  // kcov slot this copy collects into (kcov.go; -1: none)
	wordCap  int
	page     [512]uint64
	ts       [2]int64 // timespec scratch
	status   int32
	sigOld   uint64
	sigAll   uint64
	mapsPath [32]byte
	// wordRegions: the regions whose views record words (bit r).
	wordRegions uint64

	// main process only: mremap results outside the arena, to clean up;
	// the threads t1..tN; TSC bounds of the main process's forks.
	moved   []span
	th      *threadSet
	forkTSC [prog.MaxForks][2]uint64

	pin pinRes // pinned.go
	// um is the program's userfaultfd state (nil: none, umErr says why
	// when the program has uffd operations: uffdmiss.go).
	um    *uffdMiss
	umErr uintptr
	// sentinel.go: the sentinel page is mapped in this run; the value
	// last stored to it.
	sentinel    bool
	sentinelGen uint64
	mig         migrateBuf     // migrate.go
	fe          forkEv         // forkimpl.go
	rb          *rollbackState // failnth.go
	kc          *kcovState     // kcov.go; nil or !ok: no coverage
	// census is the page census around main-process forks (atfork.go;
	// nil: off for this program).
	census *pageCensus
	// held is a child kept off the CPU past its fork (prog.Op.Hold;
	// hold.go); pid 0: none.
	held  heldChild
	holds []obs.ForkHold
	pc    *pageCensus // kept across programs (its files stay open)
}

type span struct{ addr, length uint64 }

// newMachine allocates a machine; reset prepares it for each program, so
// the large fixed arrays are allocated once per executor.
func newMachine(rep, ctl, maps []byte) *machine {
	m := &machine{rep: rep, ctl: ctl, maps: maps, vmas: new([maxVMAs]vma), sigAll: ^uint64(0), th: new(threadSet)}
	m.pin.uffd = -1
	copy(m.mapsPath[:], "/proc/self/maps\x00")
	return m
}

func (m *machine) reset(p *prog.Program, wordCap int) {
	m.p, m.wordCap, m.wordRegions = p, wordCap, ^uint64(0)
	m.nvma, m.nobj, m.proc, m.inChild, m.ks = 0, 0, 0, false, 0
	m.moved = m.moved[:0]
	for i := range m.memfd {
		m.memfd[i] = -1
	}
	for i := range m.pids {
		m.pids[i] = 0
	}
	m.forkTSC = [prog.MaxForks][2]uint64{}
	m.th.clearWindows()
	rep := m.rep
	binary.LittleEndian.PutUint64(rep[0:], obs.Magic)
	binary.LittleEndian.PutUint64(rep[8:], 0)
	binary.LittleEndian.PutUint64(rep[16:], uint64(len(rep)-obs.HeaderSize)/obs.RecordSize)
	binary.LittleEndian.PutUint64(rep[24:], 0)
	clear(m.ctl)
}

const pageMask = prog.PageSize - 1
