package gen

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestGenerateValidRoundTrip(t *testing.T) {
	r, _ := testRand(t)
	w := DefaultWeights()
	for i := 0; i < iters(10000); i++ {
		p := generate(r, w) // without Generate's repair safety net
		checkProgram(t, p, "generate")
	}
}

func TestGenerateDeterministic(t *testing.T) {
	_, seed := testRand(t)
	a := Generate(rand.New(rand.NewPCG(seed, 1)), DefaultWeights())
	b := Generate(rand.New(rand.NewPCG(seed, 1)), DefaultWeights())
	if !bytes.Equal(a.Format(), b.Format()) {
		t.Fatalf("same seed, different programs:\n%s\n%s", a.Format(), b.Format())
	}
}

func TestGenerateBounds(t *testing.T) {
	r, _ := testRand(t)
	w := DefaultWeights()
	for i := 0; i < iters(3000); i++ {
		p := Generate(r, w)
		if n := len(p.Regions); n < w.MinRegions || n > w.MaxRegions {
			t.Fatalf("%d regions", n)
		}
		total := 0
		for _, reg := range p.Regions {
			total += reg.Pages
		}
		if total > w.MaxTotalPages {
			t.Fatalf("%d pages in all regions > %d\n%s", total, w.MaxTotalPages, p.Format())
		}
		if n := p.NumForks(); n > w.MaxForks {
			t.Fatalf("%d forks > %d", n, w.MaxForks)
		}
		// A fork block can run past MaxOps by its child's steps and waits.
		if n := len(p.Ops); n > 2*w.MaxOps {
			t.Fatalf("%d ops", n)
		}
		for _, op := range p.Ops {
			if op.Kind == prog.OpStore || op.Kind == prog.OpPwrite {
				if pages := touchedPages(op); pages > w.MaxStorePages+1 {
					t.Fatalf("%v touches %d pages", op, pages)
				}
			}
		}
	}
}

func touchedPages(op prog.Op) int {
	seen := map[uint64]bool{}
	op.SlotOffsets(func(_ int, off uint64) { seen[off/prog.PageSize] = true })
	return len(seen)
}

func TestGenerateZeroWeights(t *testing.T) {
	r, _ := testRand(t)
	for i := 0; i < iters(500); i++ {
		checkProgram(t, generate(r, Weights{}), "zero weights")
	}
}

// TestGenerateCoverage checks that 1000 programs exercise every feature
// the generator is meant to produce.
func TestGenerateCoverage(t *testing.T) {
	r, _ := testRand(t)
	seen := map[string]int{}
	for i := 0; i < 1000; i++ {
		p := Generate(r, DefaultWeights())
		for k, n := range features(p) {
			seen[k] += n
		}
	}
	want := []string{
		"nested fork", "kill right after fork", "fork while another is alive",
		"child store", "child check", "parent store right after fork", "vma change right after fork",
		"region >= 512 pages", "store across PMD boundary", "store across region end",
		"unaligned range", "mprotect r then rw", "mremap grow", "mremap shrink",
		"mremap maymove|fixed", "mremap dontunmap", "mmap over region", "munmap split",
		"pwrite memfd-private",
	}
	for _, k := range prog.OpKinds() {
		want = append(want, "op "+k.String())
	}
	for _, a := range prog.Advices() {
		want = append(want, "advice "+a.String())
	}
	for _, k := range []prog.RegionKind{prog.AnonPrivate, prog.AnonShared, prog.MemfdPrivate, prog.MemfdShared} {
		want = append(want, "region "+k.String())
	}
	for _, th := range []prog.THP{prog.THPDefault, prog.THPOn, prog.THPOff} {
		want = append(want, "thp "+th.String())
	}
	for _, p := range []prog.Prot{prog.ProtNone, prog.ProtRead, prog.ProtRW} {
		want = append(want, "prot "+p.String())
	}
	for _, k := range want {
		if seen[k] == 0 {
			t.Errorf("no %q in 1000 programs", k)
		}
	}
	t.Logf("features: %v", seen)
}

// features counts what a program exercises.
func features(p *prog.Program) map[string]int {
	f := map[string]int{}
	live := 0
	for _, r := range p.Regions {
		f["region "+r.Kind.String()]++
		f["thp "+r.THP.String()]++
		if r.Pages >= 512 {
			f["region >= 512 pages"]++
		}
	}
	for i, op := range p.Ops {
		f["op "+op.Kind.String()]++
		var prev prog.Op
		if i > 0 {
			prev = p.Ops[i-1]
		}
		afterFork := i > 0 && prev.Kind == prog.OpFork && prev.Proc == op.Proc
		switch op.Kind {
		case prog.OpFork:
			if op.Proc > 0 {
				f["nested fork"]++
			}
			if live > 0 {
				f["fork while another is alive"]++
			}
			live++
		case prog.OpWait:
			live--
		case prog.OpKill:
			if afterFork && prev.Fork == op.Fork {
				f["kill right after fork"]++
			}
		case prog.OpStore, prog.OpPwrite:
			if op.Proc > 0 {
				f["child store"]++
			}
			if afterFork {
				f["parent store right after fork"]++
			}
			first, last := op.Off, op.Off+uint64(op.Count-1)*op.Stride
			if first/prog.PMDSize != last/prog.PMDSize {
				f["store across PMD boundary"]++
			}
			if end := uint64(p.Regions[op.Region].Pages) * prog.PageSize; first < end && last >= end {
				f["store across region end"]++
			}
			if op.Kind == prog.OpPwrite {
				f["pwrite "+p.Regions[op.Region].Kind.String()]++
			}
		case prog.OpCheck:
			if op.Proc > 0 {
				f["child check"]++
			}
		}
		if op.Kind.ChangesVMA() {
			if afterFork {
				f["vma change right after fork"]++
			}
			if op.Off%prog.PageSize != 0 || op.Len%prog.PageSize != 0 {
				f["unaligned range"]++
			}
		}
		end := uint64(0)
		if op.Kind.HasRange() {
			end = uint64(p.Regions[op.Region].Pages) * prog.PageSize
		}
		switch op.Kind {
		case prog.OpMadvise:
			f["advice "+op.Advice.String()]++
		case prog.OpMprotect:
			f["prot "+op.Prot.String()]++
			if op.Prot == prog.ProtRW && prev.Kind == prog.OpMprotect && prev.Prot != prog.ProtRW && prev.Off == op.Off {
				f["mprotect r then rw"]++
			}
		case prog.OpMmap:
			if op.Off < end {
				f["mmap over region"]++
			}
		case prog.OpMunmap:
			if op.Off > 0 && op.Off+op.Len < end {
				f["munmap split"]++
			}
		case prog.OpMremap:
			switch {
			case op.Flags&prog.MremapDontunmap != 0:
				f["mremap dontunmap"]++
			case op.Flags == prog.MremapMaymove|prog.MremapFixed:
				f["mremap maymove|fixed"]++
			case op.NewLen > op.Len:
				f["mremap grow"]++
			case op.NewLen < op.Len:
				f["mremap shrink"]++
			}
		}
	}
	return f
}

// TestProfiles: every profile generates valid programs, and the threads
// profile has no pinned operation while the pinned profile has many.
func TestProfiles(t *testing.T) {
	for _, name := range ProfileNames() {
		w, err := Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		pinned, threads := 0, 0
		for i := 0; i < 200; i++ {
			p := Generate(r, w)
			if err := p.Validate(); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, p.Format())
			}
			if name == "short" && (len(p.Regions) > 2 || p.NumForks() > 2) {
				t.Fatalf("short profile: %d regions, %d forks\n%s", len(p.Regions), p.NumForks(), p.Format())
			}
			for _, op := range p.Ops {
				if op.Kind.Pinned() {
					pinned++
				}
				if op.Thread > 0 {
					threads++
				}
			}
		}
		t.Logf("profile %s: %d pinned ops, %d thread ops in 200 programs", name, pinned, threads)
		switch name {
		case "threads":
			if pinned != 0 || threads < 200 {
				t.Errorf("threads profile: %d pinned ops, %d thread ops", pinned, threads)
			}
		case "pinned":
			if pinned < 400 {
				t.Errorf("pinned profile: only %d pinned ops", pinned)
			}
		}
	}
	if _, err := Profile("nope"); err == nil || !strings.Contains(err.Error(), "threads") {
		t.Errorf("unknown profile error: %v", err)
	}
}

// TestGenerateArena: programs that move pages or inject a fault into a
// fork of the main process are placed low (prog.ArenaLow) about
// ArenaLowAimedProb of the time, the others about ArenaLowProb.
func TestGenerateArena(t *testing.T) {
	w := DefaultWeights()
	w.FailNthProb = 0.1
	r := rand.New(rand.NewPCG(7, 7))
	var n, low [2]int // [0]: other programs, [1]: aimed ones
	for range 2000 {
		p := Generate(r, w)
		aimed := 0
		for _, op := range p.Ops {
			if op.Kind == prog.OpMigrate || op.Kind == prog.OpMigrateLoop || (op.Kind == prog.OpFork && op.Proc == 0 && op.FailNth > 0) {
				aimed = 1
			}
		}
		n[aimed]++
		if p.Arena == prog.ArenaLow {
			low[aimed]++
		}
	}
	for i, want := range []float64{w.ArenaLowProb, w.ArenaLowAimedProb} {
		if n[i] < 100 {
			t.Fatalf("only %d programs of kind %d", n[i], i)
		}
		if got := float64(low[i]) / float64(n[i]); got < want-0.07 || got > want+0.07 {
			t.Errorf("kind %d: %d of %d programs low (%.2f), want about %.2f", i, low[i], n[i], got, want)
		}
	}
}

// TestMigrateStreak: most migrateloops run over several forks of the main
// process, and every fork under a loop after its first comes after the
// parent stored to every page of the moving region since the fork
// before (the page is then writable again, the kind of migration entry
// fork must make read-only).
func TestMigrateStreak(t *testing.T) {
	w := DefaultWeights()
	w.MigrateLoopProb = 0.5
	r := rand.New(rand.NewPCG(9, 9))
	loops, multi, rewritten, later := 0, 0, 0, 0
	for range 1000 {
		p := Generate(r, w)
		for i, op := range p.Ops {
			if op.Kind != prog.OpMigrateLoop {
				continue
			}
			loops++
			forks := 0
			pages := map[int]bool{} // pages of the region stored since the last main fork
			for _, q := range p.Ops[i+1:] {
				if q.Proc != 0 {
					continue
				}
				if q.Kind == prog.OpStore && q.Region == op.Region && q.Stride == prog.PageSize {
					for k := range q.Count {
						pages[int(q.Off/prog.PageSize)+k] = true
					}
				}
				if q.Kind == prog.OpFork {
					forks++
					if forks > 1 {
						later++
						if len(pages) >= p.Regions[op.Region].Pages {
							rewritten++
						}
					}
					pages = map[int]bool{}
				}
				if q.Kind == prog.OpWait && q.Fork == op.Fork {
					break
				}
			}
			if forks > 1 {
				multi++
			}
		}
	}
	t.Logf("%d migrateloops, %d over several forks; %d of %d later forks after a store to every page", loops, multi, rewritten, later)
	if loops < 200 || float64(multi) < 0.5*float64(loops) {
		t.Errorf("%d of %d migrateloops run over more than one fork, want over half", multi, loops)
	}
	if later == 0 || float64(rewritten) < 0.95*float64(later) {
		t.Errorf("%d of %d later forks under a migrateloop come after a store to every page of its region", rewritten, later)
	}
}
