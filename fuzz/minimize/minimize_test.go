package minimize

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

var seedFlag = flag.Uint64("seed", 0, "random seed for property tests (0: time-based)")

func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func iters(n int) int {
	if testing.Short() {
		return max(n/5, 1)
	}
	return n
}

// bigWeights make programs of a few hundred operations.
func bigWeights() gen.Weights {
	w := gen.DefaultWeights()
	w.MinRegions = 2
	w.MaxOps = 300
	w.Steps = 80
	w.ChildSteps = 10
	w.MaxForks = 24
	return w
}

// bigProgram generates big programs until one satisfies pred.
func bigProgram(t *testing.T, r *rand.Rand, pred func(*prog.Program) bool) *prog.Program {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if p := gen.Generate(r, bigWeights()); pred(p) {
			return p
		}
	}
	t.Fatal("no generated program satisfies the predicate")
	return nil
}

// checkOneMinimal fails unless p satisfies pred and removing any single
// unit breaks it.
func checkOneMinimal(t *testing.T, p *prog.Program, pred func(*prog.Program) bool) {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatalf("invalid result: %v\n%s", err, p.Format())
	}
	if !pred(p) {
		t.Fatalf("result does not reproduce:\n%s", p.Format())
	}
	for _, u := range gen.Units(p) {
		drop := make([]bool, len(p.Ops))
		for _, i := range u {
			drop[i] = true
		}
		if q := gen.RemoveOps(p, drop); pred(q) {
			t.Fatalf("not 1-minimal: removing ops %v still reproduces:\n%s", u, p.Format())
		}
	}
}

func kinds(p *prog.Program) map[prog.OpKind]int {
	m := map[prog.OpKind]int{}
	for _, op := range p.Ops {
		m[op.Kind]++
	}
	return m
}

// storeAfterForkAndMunmap: process 0 stores to r1 after "fork f0" and
// munmaps r1.
func storeAfterForkAndMunmap(p *prog.Program) bool {
	if len(p.Regions) < 2 {
		return false
	}
	forked, store, munmap := false, false, false
	for _, op := range p.Ops {
		switch {
		case op.Kind == prog.OpFork && op.Fork == 0:
			forked = true
		case op.Kind == prog.OpStore && op.Proc == 0 && op.Region == 1 && forked:
			store = true
		case op.Kind == prog.OpMunmap && op.Proc == 0 && op.Region == 1:
			munmap = true
		}
	}
	return store && munmap
}

func nestedFork(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Kind == prog.OpFork && op.Proc > 0 {
			return true
		}
	}
	return false
}

// killAndMprotectNone: some fork is killed and process 0 makes a range
// inaccessible.
func killAndMprotectNone(p *prog.Program) bool {
	k := kinds(p)
	none := false
	for _, op := range p.Ops {
		if op.Kind == prog.OpMprotect && op.Prot == prog.ProtNone && op.Proc == 0 {
			none = true
		}
	}
	return k[prog.OpKill] > 0 && none
}

// childStoreToShared: some child stores to an anon-shared region.
func childStoreToShared(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Kind == prog.OpStore && op.Proc > 0 && p.Regions[op.Region].Kind == prog.AnonShared {
			return true
		}
	}
	return false
}

func TestMinimizeSynthetic(t *testing.T) {
	r := testRand(t)
	for _, tc := range []struct {
		name    string
		pred    func(*prog.Program) bool
		ops     map[prog.OpKind]int
		regions int
	}{
		{"store after fork and munmap", storeAfterForkAndMunmap,
			map[prog.OpKind]int{prog.OpFork: 1, prog.OpWait: 1, prog.OpStore: 1, prog.OpMunmap: 1}, 2},
		{"nested fork", nestedFork, map[prog.OpKind]int{prog.OpFork: 2, prog.OpWait: 2}, 1},
		{"kill and mprotect none", killAndMprotectNone,
			map[prog.OpKind]int{prog.OpFork: 1, prog.OpKill: 1, prog.OpWait: 1, prog.OpMprotect: 1}, 1},
		{"child store to shared", childStoreToShared, map[prog.OpKind]int{prog.OpFork: 1, prog.OpStore: 1, prog.OpWait: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < iters(25); i++ {
				p := bigProgram(t, r, tc.pred)
				calls := 0
				q, st := Minimize(p, func(q *prog.Program) bool {
					calls++
					if err := q.Validate(); err != nil {
						t.Fatalf("predicate got an invalid program: %v", err)
					}
					return tc.pred(q)
				}, MaxAttempts(0))
				if st.Exhausted || st.Attempts != calls {
					t.Fatalf("stats %+v, %d calls", st, calls)
				}
				checkOneMinimal(t, q, tc.pred)
				if got := kinds(q); len(got) != len(tc.ops) || !sameCounts(got, tc.ops) {
					t.Fatalf("from %d ops to\n%s", len(p.Ops), q.Format())
				}
				if len(q.Regions) != tc.regions {
					t.Fatalf("%d regions, want %d:\n%s", len(q.Regions), tc.regions, q.Format())
				}
				for _, reg := range q.Regions {
					if reg.Pages != 1 || reg.THP != prog.THPDefault {
						t.Fatalf("region not simplified:\n%s", q.Format())
					}
				}
				for _, op := range q.Ops {
					if op.Kind == prog.OpStore && op.Count != 1 {
						t.Fatalf("store count not shrunk:\n%s", q.Format())
					}
				}
				if st.RemovedOps != len(p.Ops)-len(q.Ops) || st.RemovedRegions != len(p.Regions)-len(q.Regions) {
					t.Fatalf("stats %+v do not match %d->%d ops", st, len(p.Ops), len(q.Ops))
				}
				t.Logf("%d ops -> %d in %d attempts", len(p.Ops), len(q.Ops), st.Attempts)
			}
		})
	}
}

func sameCounts(a, b map[prog.OpKind]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMinimizeRandomPredicates checks 1-minimality against predicates that
// need several random operations.
func TestMinimizeRandomPredicates(t *testing.T) {
	r := testRand(t)
	for i := 0; i < iters(100); i++ {
		p := gen.Generate(r, bigWeights())
		if len(p.Ops) < 10 {
			continue
		}
		// The predicate: these (kind, region, proc==0) signatures all appear.
		type sig struct {
			kind   prog.OpKind
			region int
			main   bool
		}
		var need []sig
		for k := 0; k < 3; k++ {
			op := p.Ops[r.IntN(len(p.Ops))]
			need = append(need, sig{op.Kind, op.Region, op.Proc == 0})
		}
		pred := func(q *prog.Program) bool {
			for _, s := range need {
				found := false
				for _, op := range q.Ops {
					if op.Kind == s.kind && op.Region == s.region && (op.Proc == 0) == s.main {
						found = true
					}
				}
				if !found {
					return false
				}
			}
			return true
		}
		q, st := Minimize(p, pred, MaxAttempts(0))
		checkOneMinimal(t, q, pred)
		if len(q.Ops) > 3*4 {
			t.Errorf("%d ops left for 3 needed signatures:\n%s", len(q.Ops), q.Format())
		}
		t.Logf("%d ops -> %d in %d attempts", len(p.Ops), len(q.Ops), st.Attempts)
	}
}

func TestMinimizeDeterministic(t *testing.T) {
	r := testRand(t)
	p := bigProgram(t, r, storeAfterForkAndMunmap)
	a, sa := Minimize(p, storeAfterForkAndMunmap)
	b, sb := Minimize(p, storeAfterForkAndMunmap)
	if !bytes.Equal(a.Format(), b.Format()) || sa != sb {
		t.Fatalf("two runs differ: %+v %+v\n%s\n%s", sa, sb, a.Format(), b.Format())
	}
}

func TestMinimizeMaxAttempts(t *testing.T) {
	r := testRand(t)
	p := bigProgram(t, r, storeAfterForkAndMunmap)
	before := p.Format()
	calls := 0
	q, st := Minimize(p, func(q *prog.Program) bool { calls++; return storeAfterForkAndMunmap(q) }, MaxAttempts(7))
	if calls > 7 || st.Attempts != calls || !st.Exhausted {
		t.Fatalf("%d calls, stats %+v", calls, st)
	}
	if !storeAfterForkAndMunmap(q) || q.Validate() != nil {
		t.Fatalf("bad result:\n%s", q.Format())
	}
	if !bytes.Equal(p.Format(), before) {
		t.Fatal("Minimize modified its input")
	}
}

// TestMinimizeSimplifies checks each simplification pass.
func TestMinimizeSimplifies(t *testing.T) {
	parse := func(text string) *prog.Program {
		p, err := prog.Parse([]byte("forkfuzz v1\n" + text))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, in, want string
		pred           func(*prog.Program) bool
	}{
		{
			name: "mremap flags, THP, unused region",
			in: `region r0 anon-private pages=16 thp=on
region r1 memfd-shared pages=8 thp=off
mremap r0 off=0x0 len=0x1000 newlen=0x1000 flags=maymove|fixed|dontunmap to=r1 tooff=0x2000
`,
			want: `region r0 anon-private pages=1 thp=default
mremap r0 off=0x0 len=0x1000 newlen=0x1000 flags=none
`,
			pred: func(p *prog.Program) bool { return kinds(p)[prog.OpMremap] > 0 },
		},
		{
			name: "pages stop at a PMD",
			in: `region r0 anon-private pages=2048 thp=on
store r0 off=0x1ff000 count=1024 stride=0x8
`,
			want: `region r0 anon-private pages=512 thp=default
store r0 off=0x1ff000 count=1 stride=0x8
`,
			pred: func(p *prog.Program) bool { return p.Regions[0].Pages >= 512 && kinds(p)[prog.OpStore] > 0 },
		},
		{
			name: "count halves to what is needed",
			in: `region r0 memfd-private pages=4
pwrite r0 off=0x0 count=100 stride=0x8
store r0 off=0x0 count=100 stride=0x8
`,
			want: `region r0 memfd-private pages=1 thp=default
store r0 off=0x0 count=25 stride=0x8
`,
			pred: func(p *prog.Program) bool {
				for _, op := range p.Ops {
					if op.Kind == prog.OpStore && op.Count >= 20 {
						return true
					}
				}
				return false
			},
		},
		{
			name: "nested fork unwrapped",
			in: `region r0 anon-private pages=1
fork f0
f0: store r0 off=0x0
f0: fork f1
f0: kill f1
f1: check
f0: wait f1
wait f0
`,
			want: `region r0 anon-private pages=1 thp=default
fork f0
kill f0
wait f0
`,
			pred: func(p *prog.Program) bool { return kinds(p)[prog.OpKill] > 0 },
		},
		{
			name: "a used region stays in place",
			in: `region r0 anon-shared pages=3
region r1 anon-private pages=5
region r2 memfd-private pages=7
munmap r2 off=0x0 len=0x1000
`,
			want: `region r0 anon-shared pages=1 thp=default
region r1 memfd-private pages=1 thp=default
munmap r1 off=0x0 len=0x1000
`,
			pred: func(p *prog.Program) bool {
				return len(p.Ops) == 1 && p.Regions[p.Ops[0].Region].Kind == prog.MemfdPrivate && p.Regions[0].Kind == prog.AnonShared
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := parse(tc.in)
			got, _ := Minimize(in, tc.pred)
			if want := "forkfuzz v1\n" + tc.want; string(got.Format()) != want {
				t.Fatalf("got\n%s\nwant\n%s", got.Format(), want)
			}
		})
	}
}

func TestMinimizeInvalidInput(t *testing.T) {
	p := &prog.Program{Regions: []prog.Region{{Kind: prog.AnonPrivate, Pages: 1}}, Ops: []prog.Op{{Kind: prog.OpFork}}}
	q, st := Minimize(p, func(*prog.Program) bool { t.Fatal("predicate called"); return false })
	if st.Attempts != 0 || len(q.Ops) != 1 {
		t.Fatalf("got %+v\n%s", st, q.Format())
	}
}

// A predicate that made its copy of a candidate reproduce by changing a
// value hands that program back through Adjusted, and minimization goes
// on from it: here a fork's fail_nth must equal the number of operations
// before it, which every removal changes.
func TestMinimizeAdjusted(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0\ncheck\nstore r0 off=0x8\ncheck\nfork f0 fail_nth=4\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	fixed := map[string]*prog.Program{}
	aim := func(q *prog.Program) bool {
		for i := range q.Ops {
			if q.Ops[i].Kind == prog.OpFork {
				if q.Ops[i].FailNth == i {
					return true
				}
				if i == 0 {
					return false
				}
				a := q.Clone()
				a.Ops[i].FailNth = i
				fixed[string(q.Format())] = a
				return true
			}
		}
		return false
	}
	m, _ := Minimize(p, aim, Adjusted(func(q *prog.Program) *prog.Program { return fixed[string(q.Format())] }))
	fork := m.ForkOp(0)
	if fork != 1 || m.Ops[fork].FailNth != fork {
		t.Fatalf("minimized to fork at op %d:\n%s", fork, m.Format())
	}
}
