package sim

import (
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// TestSimFailNthSweep sweeps fail_nth over a fork on the simulated kernel,
// in every mode: runs are clean without a mutant; with the Async-fork
// rollback mutant, the checker's own PMD oracle (checker/rollback.go, fed
// by the simulated page tables through obs.Rollback) finds the PMD left
// write-protected, not only the simulated kernel's event.
func TestSimFailNthSweep(t *testing.T) {
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		for _, mutant := range []string{"", "async-rollback-partial"} {
			if mutant != "" && mode != Async {
				continue
			}
			points, failed, caught := -1, 0, 0
			for k := 1; k <= 64; k++ {
				text := strings.Replace(twoVMAs, "fork f0\n", "fork f0 fail_nth="+strconv.Itoa(k)+"\n", 1)
				p := mustParse(t, text)
				o, _, err := Run(p, Config{Mode: mode, Mutant: mutant}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(o.Rollbacks) != 1 {
					t.Fatalf("%v fail_nth=%d: %d rollback records", mode, k, len(o.Rollbacks))
				}
				rb := o.Rollbacks[0]
				if rb.Errno != 0 {
					failed++
				}
				var sigs []string
				for _, f := range checker.Check(p, o).Findings {
					sigs = append(sigs, f.Signature)
				}
				if mutant == "" {
					if is := Judge(p, o); len(is) > 0 {
						t.Errorf("%v fail_nth=%d: clean run judged bad: %v", mode, k, is)
					}
				} else if strings.Contains(strings.Join(sigs, " "), "pagetable:pmd-rw-not-restored") {
					caught++
				}
				if rb.Injection == obs.InjNotReached {
					points = k - rb.Remaining
					break
				}
			}
			t.Logf("%v %s: %d failure points, fork or copy failed %d times, mutant caught %d times", mode, mutant, points, failed, caught)
			if points <= 0 || failed == 0 {
				t.Errorf("%v: points %d, failed %d", mode, points, failed)
			}
			if mutant != "" && caught == 0 {
				t.Errorf("the checker's PMD oracle never caught %s", mutant)
			}
		}
	}
}

// TestSimOOMMemcgNotApplied: the simulated kernel has no memory cgroups,
// so an oom_memcg fork runs without a limit, says so (an event and the
// measurement's Memcg), and is judged clean: it once had no measurement
// at all, and every such fork was a rollback:missing finding.
func TestSimOOMMemcgNotApplied(t *testing.T) {
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		p := mustParse(t, strings.Replace(twoVMAs, "fork f0\n", "fork f0 oom_memcg=4096\n", 1))
		o, _, err := Run(p, Config{Mode: mode}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Rollbacks) != 1 || o.Rollbacks[0].Cause != obs.CauseOOMMemcg || !strings.HasPrefix(o.Rollbacks[0].Memcg, "unsupported: ") || o.Rollbacks[0].Errno != 0 {
			t.Fatalf("%v: rollbacks %+v", mode, o.Rollbacks)
		}
		said := false
		for _, e := range o.Events {
			said = said || e.Kind == obs.EvInjectNotApplied
		}
		if v := checker.Check(p, o); len(v.Findings) != 0 || !said {
			t.Fatalf("%v: findings %v, not-applied event %v", mode, v.Findings, said)
		}
	}
}
