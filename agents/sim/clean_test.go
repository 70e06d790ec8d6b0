package sim

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func nPrograms(t testing.TB, def int) int {
	if s := os.Getenv("SIM_N"); s != "" {
		n, _ := strconv.Atoi(s)
		return n
	}
	if testing.Short() {
		return def / 5
	}
	return def
}

// TestCleanModelsPass runs generated programs on every unmodified model:
// the checker and the page-table invariant must find nothing.
func TestCleanModelsPass(t *testing.T) {
	n := nPrograms(t, 500)
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 7})
		bad := 0
		for i := 0; i < n; i++ {
			p := gen.Generate(rand.New(rand.NewPCG(11, uint64(i))), gen.DefaultWeights())
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatal(err)
			}
			v := checker.Check(p, o)
			sigs, texts := KernelFindings(o)
			if len(v.Findings) == 0 && len(sigs) == 0 {
				continue
			}
			bad++
			if bad <= 2 {
				t.Errorf("%v: program %d:\n%s", mode, i, p.Format())
				for _, f := range v.Findings {
					t.Errorf("  %s", f.String())
				}
				for _, s := range texts {
					t.Errorf("  %s", s)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d programs have findings", mode, bad, n)
		}
	}
}

var _ = prog.Version

// TestCleanModelsWithFailures injects allocation failures into forks: the
// unmodified models must still satisfy every oracle (a failed fork is
// allowed, a fork whose background copy failed kills the child).
func TestCleanModelsWithFailures(t *testing.T) {
	n := nPrograms(t, 300)
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 3, FailRate: 0.5})
		bad := 0
		for i := 0; i < n; i++ {
			p := gen.Generate(rand.New(rand.NewPCG(12, uint64(i))), gen.DefaultWeights())
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatal(err)
			}
			is := Judge(p, o)
			if len(is) == 0 {
				continue
			}
			bad++
			if bad <= 2 {
				t.Errorf("%v: program %d:\n%s", mode, i, p.Format())
				for _, x := range is {
					t.Errorf("  %s", x.Explanation)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d programs have findings", mode, bad, n)
		}
	}
}

// TestArenaLowNoted: the simulated kernel runs an "arena low" program at
// the canonical addresses and says so in a note, rather than pretending
// the placement took effect.
func TestArenaLowNoted(t *testing.T) {
	tg, _ := NewTarget(Config{Mode: Eager})
	p, err := prog.Parse([]byte("forkfuzz v1\narena low\nregion r0 anon-private pages=2\nstore r0 off=0x0 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, arena := range []prog.Arena{prog.ArenaLow, prog.ArenaTop} {
		p.Arena = arena
		o, err := tg.Run(p, execOpts)
		if err != nil {
			t.Fatal(err)
		}
		noted := false
		for _, e := range o.Events {
			noted = noted || (e.Kind == obs.EvNote && strings.Contains(e.Text, "arena low"))
		}
		if noted != (arena == prog.ArenaLow) {
			t.Errorf("arena %v: noted %v: %+v", arena, noted, o.Events)
		}
		if v := checker.Check(p, o); len(v.Findings) > 0 {
			t.Errorf("arena %v: %v", arena, v.Findings)
		}
	}
}

// TestCleanFoundPrograms: programs on which a campaign once found the
// simulated kernel and the model apart, each because of a sim bug; every
// mode must now agree with the model.
func TestCleanFoundPrograms(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		// A distributed campaign on the sim (seed 1796446952990570199,
		// program 11519): mremap grew a lock-on-fault VMA in place and the
		// sim populated the new range (write faults copied the memfd's
		// pages), so a later pwrite to the file was not seen through the
		// private mapping. mremap populates only VM_LOCKED without
		// VM_LOCKONFAULT (populate_vma_page_range).
		{"mremap-grow-lockonfault", "forkfuzz v1\nregion r0 memfd-private pages=4 thp=default\nmlockonfault r0 off=0x0 len=0x4000\nmremap r0 off=0x3000 len=0x1000 newlen=0xe000 flags=none\npwrite r0 off=0x5000 count=1 stride=0x1000\n"},
	} {
		p, err := prog.Parse([]byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, mode := range []Mode{Eager, OnDemand, Async} {
			tg, _ := NewTarget(Config{Mode: mode, SchedSeed: 7})
			o, err := tg.Run(p, execOpts)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range checker.Check(p, o).Findings {
				t.Errorf("%s, %v: %s", tc.name, mode, f.String())
			}
		}
	}
}
