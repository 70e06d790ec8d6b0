package gen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestFeatureFrequencies generates programs under each profile and
// measures how often they reach each special kind (Features): every kind
// must be reachable with a reasonable probability under the default and
// everypage profiles (the threads profile turns pinned operations off).
func TestFeatureFrequencies(t *testing.T) {
	const n = 1000
	floor := map[string]map[string]float64{
		"default":   {"every-page-store": 0.2, "every-page-writer": 0.03},
		"everypage": {"every-page-store": 0.9, "every-page-writer": 0.3},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-18s", "feature")
	for _, prof := range ProfileNames() {
		fmt.Fprintf(&table, " %9s", prof)
	}
	table.WriteString("\n")
	freq := map[string]map[string]float64{}
	for _, prof := range ProfileNames() {
		w, err := Profile(prof)
		if err != nil {
			t.Fatal(err)
		}
		w.HugetlbFree = 16                               // as on a VM target (a 1 GiB guest's reserve)
		w.FileSystems = []prog.FS{prog.Tmpfs, prog.Ext4} // as on a VM target with its ext4 image
		count := map[string]int{}
		for i := 0; i < n; i++ {
			r := rand.New(rand.NewPCG(uint64(i), 42))
			for f := range Features(Generate(r, w)) {
				count[f]++
			}
		}
		freq[prof] = map[string]float64{}
		for _, f := range FeatureNames {
			freq[prof][f] = float64(count[f]) / n
		}
	}
	for _, f := range FeatureNames {
		fmt.Fprintf(&table, "%-18s", f)
		for _, prof := range ProfileNames() {
			fmt.Fprintf(&table, " %8.1f%%", 100*freq[prof][f])
		}
		table.WriteString("\n")
	}
	t.Logf("share of %d generated programs reaching each kind (seeds 0..%d):\n%s", n, n-1, table.String())
	for _, prof := range []string{"default", "everypage"} {
		for _, f := range FeatureNames {
			min := 0.03
			if v, ok := floor[prof][f]; ok {
				min = v
			}
			if freq[prof][f] < min {
				t.Errorf("profile %s: %s in %.1f%% of programs, want at least %.0f%%", prof, f, 100*freq[prof][f], 100*min)
			}
		}
	}
}
