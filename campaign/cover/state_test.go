package cover

import (
	"slices"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const stateProg = `forkfuzz v1
region r0 anon-private pages=512 thp=on
store r0 off=0x0 count=512 stride=0x1000
t1: storeloop r0 off=0x0 count=4 stride=0x1000 until=f0
fork f0
f0: store r0 off=0x0 count=1
munmap r0 off=0x0 len=0x1000
wait f0
join t1
`

func TestStateFeatures(t *testing.T) {
	p, err := prog.Parse([]byte(stateProg))
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]obs.OpResult, len(p.Ops))
	tests := []struct {
		name string
		o    *obs.Observation
		want []string
	}{
		{"nothing observed", &obs.Observation{Ops: ops}, nil},
		{"census at the fork", &obs.Observation{Ops: ops, ForkPages: []obs.ForkPages{{Fork: 0, Present: 512, Flags: true, THP: 512, PMDMapped: 0, Mlocked: 3, Shared: 500, Exclusive: 12}}},
			[]string{
				"fork-page:exclusive:child:store", "fork-page:exclusive:parent:munmap",
				"fork-page:mlocked:child:store", "fork-page:mlocked:parent:munmap",
				"fork-page:shared:child:store", "fork-page:shared:parent:munmap",
				"fork-page:thp-pte:child:store", "fork-page:thp-pte:parent:munmap",
				"fork-pages:thp-pte+mlocked+exclusive+shared",
			}},
		{"a census that failed says nothing", &obs.Observation{Ops: ops, ForkPages: []obs.ForkPages{{Fork: 0, THP: 512, Err: "pagemap: EPERM"}}}, nil},
		{"writers inside the fork, a failed fork, Async-fork's evidence", &obs.Observation{
			Ops:       withOverlap(ops, 2, &obs.Overlap{Stores: 3, Inside: 2}),
			Rollbacks: []obs.Rollback{{Fork: 0, Op: 2, Cause: "fail-nth", Injection: "injected", Site: "dup_mmap+0x12 copy_process"}},
			ForkImpl:  &obs.ForkImpl{Forks: []obs.ForkEvidence{{Fork: 0, Verdict: obs.EvDeferred, Probe: "exclusive"}}}},
			[]string{"fork-failed:fail-nth:injected::dup_mmap+0x12", "fork-impl:deferred:exclusive", "fork-overlap:writers:inside"}},
	}
	for _, tt := range tests {
		got := StateFeatures(p, tt.o)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
		if h := StateSignal(p, tt.o); len(h) != len(tt.want) || slices.Contains(h, 0) {
			t.Errorf("%s: signal %x for %d features", tt.name, h, len(tt.want))
		}
	}
}

func withOverlap(ops []obs.OpResult, i int, ov *obs.Overlap) []obs.OpResult {
	out := slices.Clone(ops)
	out[i].Overlap = ov
	return out
}

// TestTrackerKeepsNewStates: a program whose coverage is old but whose
// memory states are new enters the corpus, with or without KCOV, and a
// reopened tracker knows the states its corpus reached.
func TestTrackerKeepsNewStates(t *testing.T) {
	dir := t.TempDir()
	tr, err := Open(dir, "k", true, "")
	if err != nil {
		t.Fatal(err)
	}
	p1 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nwait f0\n")
	p2 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=2\nfork f0\nwait f0\n")
	p3 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=3\nfork f0\nwait f0\n")
	c := &obs.Coverage{PCs: []uint64{1}, Edges: []uint32{1}}
	if g, _ := tr.AddRun(p1, c, []uint64{11}); g.NewEdges != 1 || g.NewStates != 1 {
		t.Fatalf("first program: %+v", g)
	}
	if g, _ := tr.AddRun(p2, c, []uint64{11, 13}); g.NewEdges != 0 || g.NewStates != 1 {
		t.Fatalf("old edges, one new state: %+v", g)
	}
	if g, _ := tr.AddRun(p3, &obs.Coverage{Unavailable: "no KCOV"}, []uint64{11, 13}); g != (Gain{}) {
		t.Fatalf("nothing new: %+v", g)
	}
	if n := tr.Counts(); n.Corpus != 2 || n.States != 2 {
		t.Fatalf("counts %+v, want 2 programs and 2 states", n)
	}
	tr.Close()
	re, err := Open(dir, "k", true, "")
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if n := re.Counts(); n.Corpus != 2 || n.States != 2 {
		t.Errorf("reopened: %+v, want 2 programs and 2 states", n)
	}
	if g, _ := re.AddRun(p3, nil, []uint64{17}); g.NewStates != 1 || re.Counts().Corpus != 3 {
		t.Errorf("without coverage, a new state: %+v, corpus %d", g, re.Counts().Corpus)
	}
}
