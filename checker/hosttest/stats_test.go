package hosttest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker/internal/randprog"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestOutcomeHistogram prints which (operation, errno) outcomes the local
// corner-case programs reach on the host (STATS=1).
func TestOutcomeHistogram(t *testing.T) {
	if os.Getenv("STATS") == "" {
		t.Skip("STATS not set")
	}
	hist := map[string]int{}
	for s := 1; s <= envInt("HOSTN", 200); s++ {
		r := rand.New(rand.NewPCG(uint64(s), 11))
		p := randprog.Build(r, 10+r.IntN(50))
		o, err := exe(t).Run(p, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, res := range o.Ops {
			op := p.Ops[i]
			k := op.Kind.String()
			switch op.Kind {
			case prog.OpMadvise:
				k += "-" + op.Advice.String()
			case prog.OpMremap:
				k += "-" + op.Flags.String()
			}
			if !res.Ran {
				k += " notrun"
			} else {
				k += fmt.Sprintf(" errno=%d", res.Errno)
			}
			if op.Kind == prog.OpStore && res.Skipped > 0 {
				k += " skipped"
			}
			hist[k]++
		}
	}
	var ks []string
	for k := range hist {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Printf("%6d %s\n", hist[k], k)
	}
}
