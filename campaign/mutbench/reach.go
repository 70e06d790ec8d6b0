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

// triggers lists the mutants whose trigger condition program p meets.
func triggers(p *prog.Program) map[string]bool {
	hit := map[string]bool{}
	stored := map[int]bool{}       // written by the main process so far
	atFork := map[int]bool{}       // written before a fork of the main process
	pinned := map[int]bool{}       // io_uring registered (pinned) and written at a fork
	uring := map[int]bool{}        // io_uring registered
	mlocked := map[int]bool{}      // mlocked
	wipe := map[int]bool{}         // madvise wipeonfork
	keep := map[int]bool{}         // keeponfork after wipeonfork
	dontfork := map[int]bool{}     // madvise dontfork on anon-private
	wipedByChild := map[int]bool{} // a child that wrote a wipe-on-fork region
	spliced := map[int]int{}       // region -> process that vmspliced it after a fork + 1
	spliceLeak := map[int]bool{}   // pipe holding a page another process wrote since
	pipeOf := map[int]int{}        // pipe -> region last vmspliced into it
	moving := map[int]int{}        // region -> fork whose wait ends a migrateloop over it, + 1
	movedAtFork := map[int]bool{}  // private, written, and migrating at a fork of the main process
	forks := 0
	for _, op := range p.Ops {
		r := op.Region
		main := op.Proc == 0
		switch op.Kind {
		case prog.OpStore, prog.OpPwrite:
			if !main && wipe[r] {
				wipedByChild[op.Proc] = true
			}
			if a := spliced[r]; a > 0 && a-1 != op.Proc {
				for pipe, pr := range pipeOf {
					if pr == r {
						spliceLeak[pipe] = true
					}
				}
			}
			if main && forks > 0 && atFork[r] {
				reg := p.Regions[r]
				if reg.Kind == prog.MemfdPrivate {
					hit["wp-src-memfd"] = true
				}
				if reg.THP == prog.THPOn {
					hit["wp-src-hugepage-pte"] = true
					if reg.Pages >= 512 {
						hit["wp-src-pmd"] = true
					}
				}
				if mlocked[r] {
					hit["mlock-reuse"] = true
				}
				if pinned[r] {
					hit["pinned-shared"] = true
				}
				if movedAtFork[r] {
					hit["migration-wp"] = true
				}
			}
			if main {
				stored[r] = true
			}
		case prog.OpUringRead:
			if main && pinned[r] {
				hit["pinned-shared"] = true
			}
		case prog.OpUringReg:
			uring[r] = true
		case prog.OpMlock:
			if main {
				mlocked[r] = true
			}
		case prog.OpMadvise:
			if !main {
				break
			}
			switch op.Advice {
			case prog.AdvWipeonfork:
				// The kernel refuses it (EINVAL) on file-backed and
				// shared mappings.
				if p.Regions[r].Kind == prog.AnonPrivate {
					wipe[r] = true
				}
			case prog.AdvKeeponfork:
				if wipe[r] {
					keep[r] = true
				}
			case prog.AdvDontfork:
				if p.Regions[r].Kind == prog.AnonPrivate {
					dontfork[r] = true
				}
			}
		case prog.OpProcMem, prog.OpPVWrite:
			if forks > 0 && atFork[r] {
				hit["gup-write-shared"] = true
			}
		case prog.OpVmsplice:
			if forks > 0 && atFork[r] {
				spliced[r] = op.Proc + 1
				pipeOf[op.Pipe] = r
			}
		case prog.OpMigrateLoop:
			moving[r] = op.Fork + 1
		case prog.OpWait:
			for rr, f := range moving {
				if main && f == op.Fork+1 {
					delete(moving, rr)
				}
			}
		case prog.OpReadPipe:
			if spliceLeak[op.Pipe] {
				hit["cow-reuse-mapcount"] = true
			}
		case prog.OpFork:
			if !main {
				if wipedByChild[op.Proc] {
					hit["wipeonfork-lost"] = true
				}
				break
			}
			forks++
			if op.FailNth > 0 {
				hit["fail-mm-leak"] = true
			}
			for rr := range stored {
				atFork[rr] = true
				reg := p.Regions[rr]
				if reg.THP == prog.THPOn && reg.Kind == prog.AnonPrivate {
					hit["nocopy-hugepage"] = true
					if reg.Pages >= 512 {
						hit["rss-thp"] = true
					}
				}
				if uring[rr] {
					pinned[rr] = true
					hit["pinned-copy-zero"] = true
				}
				if wipe[rr] {
					hit["wipeonfork-copied"] = true
				}
				if keep[rr] {
					hit["keeponfork-ignored"] = true
				}
				if moving[rr] > 0 && !reg.Kind.Shared() {
					movedAtFork[rr] = true
				}
			}
			if len(dontfork) > 0 {
				hit["dontfork-ignored"] = true
			}
		}
	}
	return hit
}
