// Package prog is forkfuzz's program model: memory regions and a sequence of
// operations, as plain data, with a versioned text format (format.go) that
// round-trips exactly.
//
// # Execution semantics
//
// A program runs in a tree of processes. Process 0 is the executor's main
// process (the "parent"); the child created by fork fI is process I+1. Every
// operation belongs to one process (Op.Proc) and each process runs its own
// operations in program order.
//
// Processes never run user-level operations at the same time: the child of
// fork fI stays blocked (in user space) from its creation until the process
// that forked it executes "wait fI"; then the child runs all its operations,
// reaps its own children, and exits, while its parent sleeps in wait. The
// kernel's own work after fork (Async-fork's background copy, On-demand-fork's
// lazy page-table copies) still races with everything the parent does between
// "fork fI" and "wait fI"; that is exactly the window forkfuzz probes. The
// sequential user-level order makes the expected result of every program
// deterministic, so a single reference model (package checker) can judge it.
//
// Every process takes a view ("check") of all regions at well-defined points:
// a child when it starts (before its first operation), any process at an
// explicit "check" operation, and the main process after its last operation.
//
// # Regions
//
// Region rI occupies the fixed virtual range [ArenaBase+I*SpanBytes,
// +SpanBytes); it is mapped at program start with Pages pages, leaving the
// rest of its span free so mremap can grow in place and MAP_FIXED can land
// anywhere in it. All offsets in operations are byte offsets from the region's
// base. Memfd regions are backed by a memfd of SpanBytes bytes, mapped at file
// offset equal to the region offset; the file kinds (tmpfs-*, ext4-*) by an
// unlinked regular file of the same size on that file system.
//
// # Threads
//
// The main process may run extra threads t1..tN ("tN:" prefix). The main
// thread hands each thread operation to its thread when it reaches it in
// program order and goes on without waiting; each thread runs its operations
// in order; "join tN" waits until tN has finished everything handed to it
// so far, and the main process joins all threads before its end view. A
// "storeloop" writes its slots in order, over and over, until the main
// thread has executed the wait of the named fork: so it runs concurrently
// with that fork and with the child's copy. Every store of a thread records
// its invocation and response times (fenced TSC reads), so the child's
// snapshot can be checked for being a consistent cut (checker/cut).
//
// # Values
//
// Every store and pwrite writes 8-byte slots with values that identify the
// operation and slot (SlotValue), so an oracle can tell every write apart and
// say which operation wrote a value it found.
//
// # Enums
//
// Each enum (OpKind, Advice, RegionKind, THP, Prot, MremapFlags) has one
// descriptor table in enums.go: its name in the text format, the Linux
// constant it stands for, and the properties the generator, the model and
// the executors read; NumOpKinds, NumAdvices, ... count the values. Every
// interpreter has a table test that iterates 0..N-1.
//
// # Adding an operation
//
//  1. prog: a constant before numOpKinds (pinned ones between OpProcMem
//     and OpUffdWP), its row in opTable with name, syscall, properties and
//     a minimal Example; its fields in the Op doc, Format and parseOp
//     (format.go), Validate (validate.go). go test ./fuzz/prog checks the
//     table and the example.
//  2. Executor (agents/executor): a case in machine.exec (pinned kinds in
//     execPinned, pinned.go; on threads, worker.run). Without one it is
//     skipped as unhandled: TestEveryOpKindHandled fails.
//  3. Model (checker): see "Adding an operation" in package checker;
//     TestEveryOpKindModelled fails without a rule.
//  4. Simulated kernel (agents/sim): a case in machine.exec (run.go), or a
//     Skip reason saying it is not modelled; TestEveryOpKindSimulated
//     runs it on every model and judges it.
//  5. C reproducer (campaign/reproc): a case in exec_op (runtime.c.in; a
//     harness kind in run_proc), and the per-program set-up it needs in
//     emit (reproc.go). Its K_ constant and every value table come from
//     these tables (campaign/reproc enums.go), never a copy in the C;
//     TestEveryValueAtEveryOptLevel builds the example at -O0 and -O2 and
//     requires a pass at both on the host.
//  6. Generator (fuzz/gen): a weight (weights.go, and the profiles that
//     should use it), a generator case (ops.go, pinned.go), Repair's
//     clamping (repair.go), mutation if it has arguments; the units test
//     draws every kind from NumOpKinds and TestEveryValueGenerated requires
//     the kind to be generated.
//  7. README: the format section and, if it needs a kernel feature, the
//     skip reason (fuzz/obs skip.go).
//
// Adding an advice, protection or mremap flag is a row in its table (with
// its Linux value: agents/executor TestLinuxConstants checks it against
// x/sys/unix) plus its rule in the model and the sim; an executor never
// indexes past a table (a value without a row is skipped as unhandled).
// The C reproducer and checker/internal/randprog read the new row from
// the table (TestEveryValueAtEveryOptLevel runs it at -O0 and -O2,
// randprog's TestEveryValueDrawn requires it drawn).
package prog

// Version is the current program format version.
const Version = 1

// Layout constants shared by the executor and the reference model.
const (
	PageSize       = 4096
	PMDSize        = 2 << 20
	SlotSize       = 8
	MaxRegions     = 16
	MaxRegionPages = 16384 // 64 MiB
	SpanPages      = 2 * MaxRegionPages
	SpanBytes      = SpanPages * PageSize // 128 MiB per region, 2 MiB aligned
	// ArenaBase is where region r0 starts. It is far from where Go's heap
	// and the kernel's top-down mmap allocator place things.
	ArenaBase = 0x3f0000000000
	MaxOps    = 4096
	MaxForks  = 64
	MaxCount  = 1 << 16 // slots per store/pwrite
	// MaxThreads is the number of extra threads (t1..tN) the main process
	// may run besides its main thread.
	MaxThreads = 8
	// MaxFailNth bounds a fork's fail_nth (and childfail).
	MaxFailNth = 1 << 20
	// MaxLoopWrites bounds the writes of one storeloop (values encode the
	// write number in 24 bits).
	MaxLoopWrites = 1 << 24
)

// RegionKind is how a region is backed.
type RegionKind uint8

const (
	AnonPrivate RegionKind = iota
	AnonShared
	MemfdPrivate
	MemfdShared
	// hugetlb kinds (2 MiB huge pages, MAP_HUGETLB or memfd_create's
	// MFD_HUGETLB); a region's pages must be a multiple of
	// HugetlbPages. Base gives the ordinary kind with the same sharing
	// and backing.
	HugetlbPrivate
	HugetlbShared
	MemfdHugetlbPrivate
	MemfdHugetlbShared
	// file kinds: a regular file of SpanBytes bytes on a file system
	// (FS), created and unlinked by the executor, mapped like a memfd
	// (Base gives the memfd kind with the same sharing). On tmpfs the
	// file is shmem, as a memfd is; on ext4 its pages are page cache
	// with page_mkwrite and writeback.
	TmpfsPrivate
	TmpfsShared
	Ext4Private
	Ext4Shared
	numRegionKinds
)

// FS is the file system behind a file kind's region.
type FS uint8

const (
	NoFS  FS = iota // anonymous memory or a memfd
	Tmpfs           // a file on a tmpfs mount
	Ext4            // a file on an ext4 mount
	numFS
)

// HugetlbPages is the number of base pages in one 2 MiB hugetlb page: a
// hugetlb region's size must be a multiple of it.
const HugetlbPages = PMDSize / PageSize

// THP is the transparent-huge-page advice applied when a region is created.
type THP uint8

const (
	THPDefault THP = iota
	THPOn          // MADV_HUGEPAGE
	THPOff         // MADV_NOHUGEPAGE
	numTHPs
)

// Region is one named memory region; region I is called "rI".
type Region struct {
	Kind  RegionKind
	Pages int
	THP   THP
}

// Base returns the virtual address of region i.
func Base(i int) uint64 { return ArenaBase + uint64(i)*SpanBytes }

// OpKind is the kind of an operation.
type OpKind uint8

const (
	OpStore OpKind = iota
	OpPwrite
	OpMmap
	OpMunmap
	OpMprotect
	OpMadvise
	OpMremap
	OpMlock
	OpMunlock
	OpFork
	OpWait
	OpKill
	OpCheck
	OpStoreLoop
	OpJoin
	// Operations that reach memory outside the normal user fault path
	// (pinned.go).
	OpProcMem
	OpPVWrite
	OpODirect
	OpVmsplice
	OpReadPipe
	OpUringReg
	OpUringRead
	OpUffdWP
	// Page migration between NUMA nodes (move_pages): the pages stay the
	// program's, at new physical addresses, and while a page moves its
	// PTE is a migration entry that fork must copy (copy_nonpresent_pte).
	OpMigrate
	OpMigrateLoop
	// VMA changes outside mprotect, madvise and mremap (vmaops.go):
	// mlock2(MLOCK_ONFAULT), mbind, prctl(PR_SET_VMA_ANON_NAME), and
	// process_madvise of the process's own memory.
	OpMlockOnfault
	OpMbind
	OpAnonName
	OpPMadvise
	// remap_file_pages(2) of a shared mapping (vmaops.go): the range
	// becomes a fresh mapping of the same file at page PgOff.
	OpRemapFile
	// userfaultfd registration in MISSING mode and its removal
	// (vmaops.go): missing-page faults in the range go to a handler that
	// fills them with zeros.
	OpUffdReg
	OpUffdUnreg
	numOpKinds
)

// ChangesVMA reports whether the operation changes mappings (VMA-level
// changes force a whole-VMA synchronization in Async-fork).
func (k OpKind) ChangesVMA() bool { return k.HasRange() }

// Prot is a protection for mprotect.
type Prot uint8

const (
	ProtNone Prot = iota
	ProtRead
	ProtRW
	numProts
)

// Advice is a madvise advice.
type Advice uint8

const (
	AdvDontneed Advice = iota
	AdvFree
	AdvDontfork
	AdvDofork
	AdvWipeonfork
	AdvKeeponfork
	AdvHugepage
	AdvNohugepage
	AdvCollapse
	AdvPageout
	AdvCold
	AdvMergeable
	AdvUnmergeable
	AdvPopulateRead
	AdvPopulateWrite
	AdvDontneedLocked
	numAdvices
)

// MremapFlags are the flags of an mremap.
type MremapFlags uint8

const (
	MremapMaymove MremapFlags = 1 << iota
	MremapFixed
	MremapDontunmap
	mremapAll = MremapMaymove | MremapFixed | MremapDontunmap
)

// Op is one operation. Which fields matter depends on Kind:
//
//	store, pwrite            Region, Off, Count, Stride
//	storeloop                Region, Off, Count, Stride, Fork (until: the wait of that fork)
//	join                     Peer (the thread to wait for)
//	mmap, munmap, mlock,
//	munlock, mlockonfault    Region, Off, Len
//	mprotect                 Region, Off, Len, Prot
//	madvise, pmadvise        Region, Off, Len, Advice (pmadvise: cold or pageout)
//	mbind                    Region, Off, Len, Policy
//	anonname                 Region, Off, Len, Name
//	remapfile                Region, Off, Len, PgOff (file page, at most MaxPgOff)
//	mremap                   Region, Off, Len, NewLen, Flags, To, ToOff (To/ToOff with MremapFixed)
//	fork                     Fork, FailNth, OOMMemcg, ChildFail, ChildOOM (optional fault injection, main process only),
//	                         Hold (the child stays off the CPU for the parent's next Hold operations)
//	wait, kill               Fork
//	check                    -
//	procmem, pvwrite         Region, Off, Count, Stride, Into (0: self; N: the child of fork f(N-1))
//	odirect, uringreg,
//	uringread, uffdwp        Region, Off, Len
//	vmsplice                 Region, Off, Len, Pipe
//	migrate                  Region, Off, Len (moves each page to the next NUMA node, once)
//	migrateloop              Region, Off, Len, Fork (thread only; moves the pages
//	                         back and forth until the wait of that fork)
//	readpipe                 Pipe
type Op struct {
	Proc   int // 0: main process; I+1: child of fork fI
	Thread int // 0: the process's main thread; N: thread tN of the main process
	Kind   OpKind
	Region int
	Off    uint64
	Len    uint64
	Count  int
	Stride uint64
	Prot   Prot
	Advice Advice
	NewLen uint64
	Flags  MremapFlags
	To     int
	ToOff  uint64
	Fork   int
	Peer   int
	Into   int
	Pipe   int
	Policy Policy   // mbind: the memory policy (on node 0)
	Name   AnonName // anonname: the name (AnonNone clears it)
	// PgOff, on a remapfile, is the page of the mapped file (or shmem
	// object) that the range's first page shows after it.
	PgOff uint64
	// FailNth, on a fork, makes the FailNth-th fault-injection point the
	// forking thread reaches inside fork() fail (/proc/thread-self/fail-nth;
	// 0: no injection). See docs/rollback.md.
	FailNth int
	// OOMMemcg, on a fork, lets fork charge at most OOMMemcg more bytes to
	// the executor's memory cgroup (memory.max = memory.current + it), so
	// fork runs out of memory for real (0: no limit). See failnth.go.
	OOMMemcg uint64
	// ChildFail, on a fork, makes the ChildFail-th fault-injection point
	// the child reaches in its own context before it first returns to
	// user space fail (the parent writes the child's
	// /proc/PID/task/PID/fail-nth while the child is held off the CPU;
	// 0: no injection). Under Async-fork that is the child's copy of the
	// page tables (schedule_tail); under stock fork the child has no
	// failure point there. See childfail.go.
	ChildFail int
	// ChildOOM, on a fork, puts the child, before it runs, into a memory
	// cgroup of its own whose memory.max is ChildOOM bytes above what
	// the group holds, until it reaches user space: its copy of the page
	// tables runs into the limit and the memory cgroup's OOM killer
	// (0: no limit). See childfail.go.
	ChildOOM uint64
	// Hold, on a fork of the main process's main thread, keeps the child
	// off the CPU until the parent has run its next Hold operations (see
	// hold.go): under Async-fork the child's copy of the page tables then
	// comes after them, every time, instead of when the scheduler says.
	// A parent that blocks lets the child run early. 0: the child is let
	// go right after fork returned.
	Hold int
}

// Program is a forkfuzz program.
type Program struct {
	Arena   Arena // where the regions really live (see Arena)
	Regions []Region
	Ops     []Op
}

// Clone returns a deep copy of p.
func (p *Program) Clone() *Program {
	q := &Program{
		Arena:   p.Arena,
		Regions: append([]Region(nil), p.Regions...),
		Ops:     append([]Op(nil), p.Ops...),
	}
	return q
}

// NumForks returns the number of fork operations.
func (p *Program) NumForks() int {
	n := 0
	for _, op := range p.Ops {
		if op.Kind == OpFork {
			n++
		}
	}
	return n
}

// ForkOp returns the index of the operation that creates fork f, or -1.
func (p *Program) ForkOp(f int) int {
	for i, op := range p.Ops {
		if op.Kind == OpFork && op.Fork == f {
			return i
		}
	}
	return -1
}

// SlotValue is the value written by slot k of the operation at index op.
// The top byte marks forkfuzz values; bits 24..55 hold op+1, the low 24
// bits the slot number. It is never zero.
func SlotValue(op, k int) uint64 {
	return 0xA5<<56 | uint64(op+1)<<24 | uint64(k)&0xffffff
}

// DecodeSlotValue reverses SlotValue. ok is false for values that no
// operation writes.
func DecodeSlotValue(v uint64) (op, k int, ok bool) {
	if v>>56 != 0xA5 || (v>>24)&0xffffffff == 0 {
		return 0, 0, false
	}
	return int((v>>24)&0xffffffff) - 1, int(v & 0xffffff), true
}

// SlotOffsets calls fn with the region offset of every slot that a store,
// pwrite, procmem or pvwrite writes, in order.
func (op *Op) SlotOffsets(fn func(k int, off uint64)) {
	for k := 0; k < op.Count; k++ {
		fn(k, op.Off+uint64(k)*op.Stride)
	}
}
