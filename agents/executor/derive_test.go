package executor

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The executor sends complete views without their page digests
// (obs.Observation.OmitDerivedPages) and readers derive them from the
// words: on generated programs, what a reader derives is exactly what the
// executor computed from the pages it read, and a capped view keeps its
// own.
func TestDerivedPagesMatch(t *testing.T) {
	x := executor(t)
	n := 12
	if testing.Short() {
		n = 4
	}
	views, derived := 0, 0
	for i, ran := 0, 0; ran < n; i++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(i), 5)), gen.DefaultWeights())
		if hasThreadOps(p) {
			// Writer threads' logs stay reserved in this shared test
			// executor, and TestTrimHeap wants its heap small.
			continue
		}
		ran++
		o, err := x.Run(p, Options{})
		if err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		want := make([]obs.PageDigests, len(o.Views))
		for k := range o.Views {
			want[k] = o.Views[k].Pages
		}
		o.OmitDerivedPages()
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var back obs.Observation
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("program %d: %v", i, err)
		}
		for k := range back.Views {
			v := &back.Views[k]
			views++
			if !v.Truncated && len(want[k]) > 0 {
				derived++
			}
			if len(want[k]) == 0 && len(v.Pages) == 0 {
				continue
			}
			if !reflect.DeepEqual(v.Pages, want[k]) {
				t.Fatalf("program %d view %d (truncated %v): %d pages read back, the executor had %d", i, k, v.Truncated, len(v.Pages), len(want[k]))
			}
		}
	}
	if derived == 0 {
		t.Fatalf("%d views, none with derived digests: the test shows nothing", views)
	}
	// A capped view keeps its digests (they stand for the words past the
	// cap).
	_, o := run(t, "forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nstore r0 off=0x0 count=64 stride=0x8\nfork f0\nwait f0\n", Options{WordCap: 1})
	o.OmitDerivedPages()
	capped := 0
	for k, v := range o.Views {
		if v.Truncated {
			capped++
			if len(v.Pages) == 0 {
				t.Errorf("view %d: capped, and its digests were dropped", k)
			}
		}
	}
	if capped == 0 {
		t.Errorf("none of %d views capped at one word", len(o.Views))
	}
}

func hasThreadOps(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Thread > 0 || op.Kind == prog.OpJoin {
			return true
		}
	}
	return false
}

// BenchmarkObservationJSON decodes the observations of programs 0-19 as
// a host reads them, with the executor's page digests and without them
// (derived from the words): go test -bench ObservationJSON ./agents/executor/
func BenchmarkObservationJSON(b *testing.B) {
	x := executor(b)
	var full, lean [][]byte
	for i := 0; len(full) < 20; i++ {
		p := gen.Generate(rand.New(rand.NewPCG(uint64(i), 5)), gen.DefaultWeights())
		o, err := x.Run(p, Options{})
		if err != nil {
			b.Fatalf("program %d: %v", i, err)
		}
		f, _ := json.Marshal(o)
		o.OmitDerivedPages()
		l, _ := json.Marshal(o)
		full, lean = append(full, f), append(lean, l)
	}
	for _, c := range []struct {
		name string
		set  [][]byte
	}{{"digests", full}, {"derived", lean}} {
		b.Run(c.name, func(b *testing.B) {
			n := 0
			for _, d := range c.set {
				n += len(d)
			}
			for b.Loop() {
				for _, d := range c.set {
					var o obs.Observation
					if err := json.Unmarshal(d, &o); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n)/float64(len(c.set)), "bytes/obs")
		})
	}
}
