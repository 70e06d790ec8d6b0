package mutbench

import (
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Reach estimates, without a kernel, how often generated programs meet
// each mutant's trigger condition (kernel.Mutant.Needs): it generates
// programs 0..n-1 of a campaign with seed and weights w (fresh programs,
// as a campaign's first ones; later ones are also mutated) and counts,
// per mutant name, the programs that do what the bug needs. A condition
// met is not a detection (an oracle must still look at the page at the
// right time), but a condition never met is a bug the campaign cannot
// find: a gap of the generator.
func Reach(w gen.Weights, seed uint64, n int) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i++ {
		for name := range triggers(campaign.NewProgram(seed, int64(i), nil, w)) {
			out[name]++
		}
	}
	return out
}

// QEMUWeights returns w as a campaign on a default QEMU VM draws programs
// (campaign.HugetlbWeights and FileWeights from the target): the guest's
// 1 GiB reserves 16 hugetlb pages at boot and has tmpfs and ext4.
func QEMUWeights(w gen.Weights) gen.Weights {
	if w.HugetlbFree == 0 {
		w.HugetlbFree = 16
	}
	if len(w.FileSystems) == 0 {
		w.FileSystems = []prog.FS{prog.Tmpfs, prog.Ext4}
	}
	return w
}

// triggerState is what triggers knows of a program's regions (by index)
// after the operations so far.
type triggerState struct {
	p            *prog.Program
	hit          map[string]bool
	stored       map[int]bool // written by the main process so far
	atFork       map[int]bool // written before a fork of the main process
	pinned       map[int]bool // io_uring registered (pinned) and written at a fork
	uring        map[int]bool // io_uring registered
	mlocked      map[int]bool // mlocked
	wipe         map[int]bool // madvise wipeonfork
	keep         map[int]bool // keeponfork after wipeonfork
	dontfork     map[int]bool // madvise dontfork on anon-private
	wipedByChild map[int]bool // a child that wrote a wipe-on-fork region
	spliced      map[int]int  // region -> process that vmspliced it after a fork + 1
	spliceLeak   map[int]bool // pipe holding a page another process wrote since
	pipeOf       map[int]int  // pipe -> region last vmspliced into it
	moving       map[int]int  // region -> fork whose wait ends a migrateloop over it, + 1
	movedAtFork  map[int]bool // private, written, and migrating at a fork of the main process
	pagedOut     map[int]bool // anon-private, written, then madvise pageout by the main process
	forks        int
}

// triggers lists the mutants whose trigger condition program p meets.
func triggers(p *prog.Program) map[string]bool {
	t := &triggerState{p: p, hit: map[string]bool{}, stored: map[int]bool{}, atFork: map[int]bool{}, pinned: map[int]bool{},
		uring: map[int]bool{}, mlocked: map[int]bool{}, wipe: map[int]bool{}, keep: map[int]bool{}, dontfork: map[int]bool{},
		wipedByChild: map[int]bool{}, spliced: map[int]int{}, spliceLeak: map[int]bool{}, pipeOf: map[int]int{},
		moving: map[int]int{}, movedAtFork: map[int]bool{}, pagedOut: map[int]bool{}}
	for _, op := range p.Ops {
		t.op(op)
	}
	return t.hit
}

// op follows one operation.
func (t *triggerState) op(op prog.Op) {
	r := op.Region
	main := op.Proc == 0
	switch op.Kind {
	case prog.OpStore, prog.OpPwrite:
		t.store(op)
	case prog.OpUringRead:
		if main && t.pinned[r] {
			t.hit["pinned-shared"] = true
		}
	case prog.OpUringReg:
		t.uring[r] = true
	case prog.OpMlock:
		if main {
			t.mlocked[r] = true
		}
	case prog.OpMadvise:
		if main {
			t.madvise(op)
		}
	case prog.OpProcMem, prog.OpPVWrite:
		if t.forks > 0 && t.atFork[r] {
			t.hit["gup-write-shared"] = true
		}
	case prog.OpVmsplice:
		if t.forks > 0 && t.atFork[r] {
			t.spliced[r] = op.Proc + 1
			t.pipeOf[op.Pipe] = r
		}
	case prog.OpMigrateLoop:
		t.moving[r] = op.Fork + 1
	case prog.OpWait:
		for rr, f := range t.moving {
			if main && f == op.Fork+1 {
				delete(t.moving, rr)
			}
		}
	case prog.OpReadPipe:
		if t.spliceLeak[op.Pipe] {
			t.hit["cow-reuse-mapcount"] = true
		}
	case prog.OpFork:
		t.fork(op)
	}
}

// store follows a store or pwrite.
func (t *triggerState) store(op prog.Op) {
	r := op.Region
	main := op.Proc == 0
	if !main && t.wipe[r] {
		t.wipedByChild[op.Proc] = true
	}
	if reg := t.p.Regions[r]; !main && t.atFork[r] && reg.Kind.Memfd() && !reg.Kind.Shared() && !reg.Kind.Hugetlb() {
		// Written before the fork (fork copies the page tables); the
		// page the child writes must be one the parent only read, which
		// this estimate does not follow.
		t.hit["file-private-writable"] = true
	}
	if a := t.spliced[r]; a > 0 && a-1 != op.Proc {
		for pipe, pr := range t.pipeOf {
			if pr == r {
				t.spliceLeak[pipe] = true
			}
		}
	}
	if main && t.forks > 0 && t.atFork[r] {
		reg := t.p.Regions[r]
		if reg.Kind == prog.MemfdPrivate {
			t.hit["wp-src-memfd"] = true
		}
		if reg.Kind.Hugetlb() && !reg.Kind.Shared() {
			t.hit["wp-src-hugetlb"] = true
		}
		if reg.THP == prog.THPOn {
			t.hit["wp-src-hugepage-pte"] = true
			if reg.Pages >= 512 {
				t.hit["wp-src-pmd"] = true
			}
		}
		if t.mlocked[r] {
			t.hit["mlock-reuse"] = true
		}
		if t.pinned[r] {
			t.hit["pinned-shared"] = true
		}
		if t.movedAtFork[r] {
			t.hit["migration-wp"] = true
		}
	}
	if main {
		t.stored[r] = true
	}
}

// madvise follows a madvise of the main process.
func (t *triggerState) madvise(op prog.Op) {
	r := op.Region
	switch op.Advice {
	case prog.AdvWipeonfork:
		// The kernel refuses it (EINVAL) on file-backed and shared
		// mappings.
		if t.p.Regions[r].Kind == prog.AnonPrivate {
			t.wipe[r] = true
		}
	case prog.AdvKeeponfork:
		if t.wipe[r] {
			t.keep[r] = true
		}
	case prog.AdvDontfork:
		if t.p.Regions[r].Kind == prog.AnonPrivate {
			t.dontfork[r] = true
		}
	case prog.AdvPageout:
		if t.p.Regions[r].Kind == prog.AnonPrivate && t.stored[r] {
			t.pagedOut[r] = true
		}
	}
}

// fork follows a fork: what the main process's fork finds in each region.
func (t *triggerState) fork(op prog.Op) {
	if op.Proc != 0 {
		if t.wipedByChild[op.Proc] {
			t.hit["wipeonfork-lost"] = true
		}
		return
	}
	t.forks++
	if op.FailNth > 0 {
		t.hit["fail-mm-leak"] = true
	}
	for rr := range t.stored {
		t.atFork[rr] = true
		reg := t.p.Regions[rr]
		if reg.THP == prog.THPOn && reg.Kind == prog.AnonPrivate {
			t.hit["nocopy-hugepage"] = true
			if reg.Pages >= 512 {
				t.hit["rss-thp"] = true
			}
		}
		if t.uring[rr] {
			t.pinned[rr] = true
			t.hit["pinned-copy-zero"] = true
		}
		if t.wipe[rr] {
			t.hit["wipeonfork-copied"] = true
		}
		if t.keep[rr] {
			t.hit["keeponfork-ignored"] = true
		}
		if t.moving[rr] > 0 && !reg.Kind.Shared() {
			t.movedAtFork[rr] = true
		}
	}
	if len(t.dontfork) > 0 {
		t.hit["dontfork-ignored"] = true
	}
	if len(t.pagedOut) > 0 {
		t.hit["swap-dup-skipped"] = true
	}
}
