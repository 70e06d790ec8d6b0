package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Weights tunes Generate and Mutate. Weights are relative: within a group,
// an entry is picked with probability weight/sum; a group whose weights are
// all zero is picked uniformly. Probabilities are in [0, 1]. The zero value
// is usable (normalized to sensible bounds) but DefaultWeights is the tuned
// starting point.
type Weights struct {
	// Operation kinds, one step of a process. Waits are not listed: every
	// fork is waited for, right after its child's operations or later.
	Store, Pwrite, Mmap, Munmap, Mprotect, Madvise, Mremap, Mlock, Munlock, Fork, Kill, Check int
	// Pinned and out-of-fault-path operations (prog/pinned.go).
	ProcMem, PVWrite, ODirect, Vmsplice, ReadPipe, UringReg, UringRead, UffdWP int
	// Migrate: move a range's pages to another NUMA node, once (a VM
	// has two nodes; elsewhere the executor skips it).
	Migrate int
	// VMA changes outside mprotect, madvise and mremap (prog/vmaops.go):
	// mlock2(MLOCK_ONFAULT), mbind, anonymous VMA names, process_madvise,
	// remap_file_pages (mostly on shared regions, ops.go).
	MlockOnfault, Mbind, AnonName, PMadvise, RemapFile int
	// UffdReg, UffdUnreg: userfaultfd MISSING registration of a range and
	// its removal (mostly on regions whose holes are not a file's, ops.go).
	UffdReg, UffdUnreg int
	// Policies weighs each prog.Policy (mbind), indexed by its value.
	Policies [prog.NumPolicies]int

	// RegionKinds weighs prog.AnonPrivate, AnonShared, MemfdPrivate,
	// MemfdShared.
	RegionKinds [4]int
	// THP weighs prog.THPDefault, THPOn, THPOff.
	THP [3]int
	// Sizes weighs region size classes: tiny (1-4 pages), small (5-64),
	// medium (65-511), PMD (512-2048 pages, whole 2 MiB PMDs) and large
	// (2049 pages up to MaxTotalPages).
	Sizes [5]int
	// Advices weighs each prog.Advice, indexed by its value.
	Advices []int
	// Prots weighs prog.ProtNone, ProtRead, ProtRW.
	Prots [3]int
	// Mremaps weighs mremap shapes: grow, shrink, move (maymove|fixed to a
	// region), dontunmap (maymove|dontunmap, sometimes fixed), maymove
	// alone (the kernel picks the address) and invalid flag sets.
	Mremaps [6]int
	// Ranges weighs the ranges of VMA operations: whole region, head,
	// tail, middle (splits the VMA), one page, around a PMD boundary,
	// across or beyond the region end.
	Ranges [7]int
	// Mutations weighs Mutate's kinds of change.
	Mutations MutationWeights

	MinRegions, MaxRegions int
	// MaxTotalPages caps the sum of the regions' pages.
	MaxTotalPages int
	// MaxStorePages caps the pages one store or pwrite touches.
	MaxStorePages int
	// MaxOps is a soft cap on operations (a fork block may go a little
	// past it).
	MaxOps int
	// MaxForks caps forks per program (at most prog.MaxForks).
	MaxForks int
	// MaxDepth caps nesting: 1 means only process 0 forks.
	MaxDepth int
	// Steps and ChildSteps are the maximum steps of process 0 after the
	// pre-fork prologue and of a child.
	Steps, ChildSteps int

	// NestProb is the probability that a child may fork.
	NestProb float64
	// KillProb is the probability that a fork is killed right after it.
	KillProb float64
	// RaceProb is the probability that a fork is followed by a burst of
	// up to RaceOps parent operations (stores and VMA changes) that race
	// with the copy.
	RaceProb float64
	RaceOps  int
	// DeferWaitProb is the probability that a wait is left for later, so
	// the parent can fork again while the child is alive.
	DeferWaitProb float64
	// BoundaryProb is the probability that an offset is picked near a
	// page, PMD or VMA boundary rather than anywhere.
	BoundaryProb float64
	// UnalignedProb is the probability that a VMA operation gets an
	// unaligned offset or length (the kernel answers EINVAL).
	UnalignedProb float64
	// ThreadProb is the probability that a fork of the main process runs
	// while 1..MaxWriters threads keep storing (storeloop until the fork's
	// wait); ThreadVMAProb that a racing parent operation runs on a thread.
	ThreadProb, ThreadVMAProb float64
	MaxWriters                int
	// MigrateLoopProb is the probability that a fork of the main process
	// runs while a thread moves the pages of one region between NUMA
	// nodes (migrateloop until the fork's wait), so the fork meets
	// migration entries; half of those forks are followed by a store to
	// every page of that region, so the oracles judge each of them.
	MigrateLoopProb float64
	// MigrateForks bounds the forks one migrateloop runs over: 70% of
	// them get 1..MigrateForks-1 more forks of the main process right
	// after the first fork's wait, each after the parent stored to every
	// page of the region again (a fork meets a page mid-move in a few
	// runs in a hundred; each fork is another draw).
	MigrateForks int
	// FailNthProb is the probability that a fork of the main process
	// carries fail_nth=K (K up to MaxFailNth): on a kernel with fault
	// injection, the K-th failure point inside that fork fails and the
	// rollback oracle judges the parent.
	FailNthProb float64
	MaxFailNth  int
	// ChildFailProb is the probability that a fork of the main process
	// without fail_nth carries childfail=K (K up to MaxChildFail): the
	// K-th failure point of the child before user space fails (under
	// Async-fork, in its copy of the page tables).
	ChildFailProb float64
	MaxChildFail  int
	// EveryPageProb is the probability that right after a fork the
	// forking process stores a fresh value to every page of every region
	// (one store per region, one slot per page) before the child looks,
	// so the oracles judge every page rather than the few a random store
	// hits; EveryPageChildProb the same for the child's first operation
	// (the parent's later views then judge every page the other way).
	// EveryPageWriterProb is the probability that a writer thread of a
	// fork (ThreadProb) stores to every page of its region while the
	// fork runs, rather than to at most 64 slots.
	EveryPageProb, EveryPageChildProb, EveryPageWriterProb float64
	// PreForkAdviceProb is the probability that a fork of the main
	// process comes right after a madvise that changes how the kernel
	// holds a region's pages (pageout: swapped out unless something reads
	// them first; mergeable: KSM; collapse: THP; cold; populate_write:
	// every page present and writable, private file pages copied), with the writer
	// threads already running, so the fork meets those pages as they are.
	PreForkAdviceProb float64
	// IdiomProb is the probability of each chance to plant a known bug
	// shape (idioms.go): the prologue's io_uring registration over written
	// pages before the first fork, a fork of the main process carrying a
	// nested-fork or vmsplice-across-COW idiom; twice IdiomProb that a
	// prologue DONTFORK/WIPEONFORK is undone (DOFORK/KEEPONFORK) before the
	// fork.
	IdiomProb float64
	// ArenaLowProb is the probability that a program says "arena low"
	// (prog.Arena: its regions below the Go heap, so fork copies them
	// first); ArenaLowAimedProb the same for a program that moves pages
	// between NUMA nodes or injects a fault into a fork of the main
	// process, which both need it: a move in flight when fork starts
	// has finished by the time fork reaches a top arena, and fail_nth
	// counts the runtime's shifting failure points first.
	ArenaLowProb, ArenaLowAimedProb float64
	// HugetlbProb is the probability that a program gets a hugetlb
	// region (hugetlb.go) where the target has HugetlbFree free 2 MiB
	// pages; HugetlbFree 0 (the default: the campaign sets it from the
	// target, agents.HugetlbPages) means none.
	HugetlbProb float64
	HugetlbFree int
	// FileProb is the probability that a program gets a file region
	// (files.go) on one of FileSystems, the file systems the target has
	// a directory on (none by default: the campaign sets them from the
	// target, agents.FileSystemsOf).
	FileProb    float64
	FileSystems []prog.FS
}

// Short returns w cut down to short programs (the short profile): at
// most two regions of at most 2048 pages in all, four steps of process 0,
// three of a child, two forks.
func (w Weights) Short() Weights {
	w.MaxRegions = min(w.MaxRegions, 2)
	w.MinRegions = min(w.MinRegions, w.MaxRegions)
	w.MaxTotalPages = min(w.MaxTotalPages, 2048)
	w.Steps = min(w.Steps, 4)
	w.ChildSteps = min(w.ChildSteps, 3)
	w.MaxForks = min(w.MaxForks, 2)
	w.MaxOps = min(w.MaxOps, 24)
	return w
}

// MutationWeights weighs the kinds of change Mutate makes.
type MutationWeights struct {
	Insert, Remove, Change, Region, Splice, DupFork, Swap, Race, Crossover int
}

// DefaultWeights returns the tuned default weights.
func DefaultWeights() Weights {
	adv := make([]int, len(prog.Advices()))
	for i := range adv {
		adv[i] = 2
	}
	adv[prog.AdvDontneed] = 4
	adv[prog.AdvDontfork] = 3
	adv[prog.AdvWipeonfork] = 3
	return Weights{
		Store: 30, Pwrite: 6, Mmap: 6, Munmap: 8, Mprotect: 8, Madvise: 10, Mremap: 8,
		Mlock: 3, Munlock: 2, Fork: 14, Kill: 2, Check: 4,
		ProcMem: 3, PVWrite: 2, ODirect: 2, Vmsplice: 2, ReadPipe: 2, UringReg: 1, UringRead: 2, UffdWP: 1,
		Migrate:      2,
		MlockOnfault: 2, Mbind: 2, AnonName: 2, PMadvise: 1, RemapFile: 2,
		UffdReg: 2, UffdUnreg: 1,
		Policies:    [prog.NumPolicies]int{2, 1, 2, 1, 1},
		RegionKinds: [4]int{4, 2, 2, 2},
		THP:         [3]int{2, 2, 1},
		Sizes:       [5]int{5, 4, 3, 4, 1},
		Advices:     adv,
		Prots:       [3]int{2, 3, 2},
		Mremaps:     [6]int{3, 2, 4, 2, 1, 1},
		Ranges:      [7]int{3, 2, 2, 3, 3, 4, 2},
		Mutations: MutationWeights{
			Insert: 10, Remove: 6, Change: 10, Region: 3, Splice: 3, DupFork: 2, Swap: 3, Race: 4, Crossover: 2,
		},
		MinRegions:          1,
		MaxRegions:          6,
		MaxTotalPages:       8192, // 32 MiB
		MaxStorePages:       1024,
		MaxOps:              96,
		MaxForks:            8,
		MaxDepth:            3,
		Steps:               16,
		ChildSteps:          6,
		NestProb:            0.3,
		KillProb:            0.1,
		RaceProb:            0.75,
		RaceOps:             4,
		DeferWaitProb:       0.25,
		BoundaryProb:        0.6,
		UnalignedProb:       0.05,
		ThreadProb:          0.25,
		ThreadVMAProb:       0.1,
		MaxWriters:          3,
		MigrateLoopProb:     0.12,
		MigrateForks:        4,
		FailNthProb:         0.03,
		MaxFailNth:          160, // a fork of a generated program has about 100-150 failure points
		EveryPageProb:       0.1,
		EveryPageChildProb:  0,
		EveryPageWriterProb: 0.15,
		PreForkAdviceProb:   0.15,
		IdiomProb:           0.2,
		ArenaLowProb:        0.25,
		ArenaLowAimedProb:   0.9,
		HugetlbProb:         0.12,
		FileProb:            0.15,
		// ChildFailProb stays 0 by default: campaigns reach the child's
		// failure points through sweep --child (every point in turn).
		MaxChildFail: 48, // the child of a small program passes about 36 under Async-fork (6.1 port)
	}
}

// normalized returns w with bounds forced into range.
func (w Weights) normalized() Weights {
	w.MaxRegions = min(max(w.MaxRegions, 1), prog.MaxRegions)
	w.MinRegions = min(max(w.MinRegions, 1), w.MaxRegions)
	w.MaxTotalPages = max(w.MaxTotalPages, w.MaxRegions)
	if w.MaxStorePages <= 0 {
		w.MaxStorePages = 64
	}
	if w.MaxOps <= 0 {
		w.MaxOps = 64
	}
	w.MaxOps = min(w.MaxOps, prog.MaxOps/2)
	w.MaxForks = min(max(w.MaxForks, 0), prog.MaxForks)
	w.MaxDepth = max(w.MaxDepth, 1)
	w.Steps = max(w.Steps, 1)
	w.ChildSteps = max(w.ChildSteps, 1)
	w.RaceOps = max(w.RaceOps, 1)
	adv := make([]int, numAdvices)
	copy(adv, w.Advices)
	w.Advices = adv
	return w
}

func (w *Weights) opWeights() []int {
	ws := make([]int, numOpKinds)
	ws[prog.OpStore] = w.Store
	ws[prog.OpPwrite] = w.Pwrite
	ws[prog.OpMmap] = w.Mmap
	ws[prog.OpMunmap] = w.Munmap
	ws[prog.OpMprotect] = w.Mprotect
	ws[prog.OpMadvise] = w.Madvise
	ws[prog.OpMremap] = w.Mremap
	ws[prog.OpMlock] = w.Mlock
	ws[prog.OpMunlock] = w.Munlock
	ws[prog.OpFork] = w.Fork
	ws[prog.OpKill] = w.Kill
	ws[prog.OpCheck] = w.Check
	ws[prog.OpProcMem] = w.ProcMem
	ws[prog.OpPVWrite] = w.PVWrite
	ws[prog.OpODirect] = w.ODirect
	ws[prog.OpVmsplice] = w.Vmsplice
	ws[prog.OpReadPipe] = w.ReadPipe
	ws[prog.OpUringReg] = w.UringReg
	ws[prog.OpUringRead] = w.UringRead
	ws[prog.OpUffdWP] = w.UffdWP
	ws[prog.OpMigrate] = w.Migrate
	ws[prog.OpMlockOnfault] = w.MlockOnfault
	ws[prog.OpMbind] = w.Mbind
	ws[prog.OpAnonName] = w.AnonName
	ws[prog.OpPMadvise] = w.PMadvise
	ws[prog.OpRemapFile] = w.RemapFile
	ws[prog.OpUffdReg] = w.UffdReg
	ws[prog.OpUffdUnreg] = w.UffdUnreg
	return ws
}
