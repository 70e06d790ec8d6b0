package gate

import (
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func mustProg(t *testing.T, text string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGroupAndClassify: findings group by identical reproducers, by the
// same first bad (process, op, region, page) in the same program, and by
// a reproducer that shows both signatures; statuses follow known issues
// and the baseline; groups count once.
func TestGroupAndClassify(t *testing.T) {
	a := mustProg(t, "forkfuzz v1\nregion r0 anon-private pages=1\nstore r0 off=0x0 count=1\nfork f0\nwait f0\n")
	b := mustProg(t, "forkfuzz v1\nregion r0 anon-private pages=2\nfork f0\nstore r0 off=0x0 count=1\nwait f0\n")
	c := mustProg(t, "forkfuzz v1\nregion r0 memfd-private pages=2\nfork f0\nwait f0\n")
	ev := &checker.Finding{Proc: 1, Op: 2, Region: 0, Page: 0}
	fs := []FindingRecord{
		// G1: a and its twin by identical minimized program (groups are
		// numbered in the order of their first finding).
		{Signature: "isolation:x", Minimized: "m", reproProg: a, origProg: a},
		{Signature: "memory:x", Minimized: "m", reproProg: a, origProg: b},
		// G2: same first bad page in the same original program c.
		{Signature: "snapshot:lost", origProg: c, reproProg: c, origEv: ev},
		{Signature: "memory:lost", origProg: c, reproProg: c, origEv: &checker.Finding{Proc: 1, Op: 2, Region: 0, Page: 0, View: 3}},
		// G3: b's reproducer (minimized) also shows pagetable:y.
		{Signature: "mapping:z", Minimized: "m", reproProg: b, origProg: b, reproSigs: []string{"mapping:z", "pagetable:y"}},
		{Signature: "pagetable:y", Minimized: "m", reproProg: mustProg(t, "forkfuzz v1\nregion r0 anon-shared pages=1\nfork f0\nwait f0\n"), origProg: c},
		// G4: alone, known.
		{Signature: "errno:q"},
	}
	fs[0].Baseline = &BaselineReplay{Runs: 1, Reproduced: 1}
	fs[1].Baseline = &BaselineReplay{Runs: 3, Reproduced: 0}
	fs[2].Baseline = &BaselineReplay{Runs: 1, Reproduced: 1}
	fs[3].Baseline = &BaselineReplay{Runs: 1, Reproduced: 1}
	fs[6].reproProg = mustProg(t, "forkfuzz v1\nregion r0 anon-private pages=3\nfork f0\nwait f0\n")
	fs[6].origProg = fs[6].reproProg
	known, err := ParseKnownIssues("k", []byte("errno:q reason=accepted\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{cfg: Config{Known: known, OpenBaseline: nil, Now: func() time.Time { return time.Now() }}, res: &Result{Findings: fs}}
	g.cfg.OpenBaseline = nil
	g.classify()
	want := map[string]string{"isolation:x": "G1", "memory:x": "G1", "snapshot:lost": "G2", "memory:lost": "G2", "mapping:z": "G3", "pagetable:y": "G3", "errno:q": "G4"}
	for _, f := range g.res.Findings {
		if f.Group != want[f.Signature] {
			t.Errorf("%s in group %s, want %s", f.Signature, f.Group, want[f.Signature])
		}
	}
	st := map[string]string{}
	for _, f := range g.res.Findings {
		st[f.Signature] = f.Status
	}
	if st["isolation:x"] != StatusPreexisting || st["memory:x"] != StatusNew || st["snapshot:lost"] != StatusPreexisting || st["errno:q"] != StatusKnown {
		t.Fatalf("statuses %v", st)
	}
	c2 := g.res.Counts
	// G1 new (memory:x), G2 pre-existing, G3 new (never replayed on a baseline), G4 known.
	if c2.Groups != 4 || c2.NewGroups != 2 || c2.KnownGroups != 1 || c2.PreexistingGroups != 1 || c2.Findings != 7 {
		t.Fatalf("counts %+v", c2)
	}
}
