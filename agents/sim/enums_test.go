package sim

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The simulated kernel runs every operation kind (pinned kinds it does not
// model are skipped with that reason, never "unhandled"), and on every
// unmodified model each kind's example, and a madvise of every advice,
// passes the checker: the sim and the model agree on each value.
func TestEveryOpKindSimulated(t *testing.T) {
	var progs []*prog.Program
	for k := prog.OpKind(0); int(k) < prog.NumOpKinds; k++ {
		progs = append(progs, prog.Example(k))
	}
	for _, a := range prog.Advices() {
		p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=default\nstore r0 off=0x0 count=1 stride=0x8\n" +
			"madvise r0 off=0x0 len=0x2000 advice=" + a.String() + "\nfork f0\nf0: store r0 off=0x8 count=1 stride=0x8\nwait f0\n"))
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, p)
	}
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 1})
		for _, p := range progs {
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatalf("%v: %v\n%s", mode, err, p.Format())
			}
			for i, r := range o.Ops {
				if strings.Contains(r.Skip, "unhandled") {
					t.Errorf("%v: op %d (%v): %s", mode, i, p.Ops[i].Kind, r.Skip)
				}
			}
			if v := checker.Check(p, o); len(v.Findings) > 0 {
				t.Errorf("%v: the model disagrees with the sim: %s\n%s", mode, v.Findings[0].Explanation, p.Format())
			}
		}
	}
}
