package checker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func mustParse(t testing.TB, text string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return p
}

// recorded is a program and what a real kernel did with it (testdata:
// NAME.ffz beside NAME.json).
type recorded struct {
	file string // the .ffz
	p    *prog.Program
	o    obs.Observation
}

// loadRecorded reads every program matching glob and its observation; no
// match is a test failure.
func loadRecorded(t testing.TB, glob string) []recorded {
	t.Helper()
	files, _ := filepath.Glob(glob)
	if len(files) == 0 {
		t.Fatalf("no testdata %s", glob)
	}
	var out []recorded
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := recorded{file: f, p: mustParse(t, string(text))}
		b, err := os.ReadFile(strings.TrimSuffix(f, ".ffz") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r.o); err != nil {
			t.Fatalf("%s.json: %v", strings.TrimSuffix(f, ".ffz"), err)
		}
		out = append(out, r)
	}
	return out
}

// findView returns the view of proc taken at at.
func findView(t testing.TB, o *obs.Observation, proc, at int) *obs.View {
	t.Helper()
	for i := range o.Views {
		if o.Views[i].Proc == proc && o.Views[i].At == at {
			return &o.Views[i]
		}
	}
	t.Fatalf("no view of proc %d at %d", proc, at)
	return nil
}

func wordAt(v *obs.View, region int, off uint64) uint64 {
	for _, w := range v.Words {
		if w.Region == region && w.Off == off {
			return w.Value
		}
	}
	return 0
}

// setWord changes one word of a view, keeping the page digests consistent.
func setWord(v *obs.View, region int, off, val uint64) { v.SetWord(region, off, val) }

// setState sets the state of one page in a view (0: unmapped), dropping
// its content if it stops being readable.
func setState(v *obs.View, region, page int, st obs.PageState) {
	var runs []obs.Run
	for _, r := range v.Runs {
		if r.Region != region || page < r.First || page >= r.First+r.N {
			runs = append(runs, r)
			continue
		}
		if page > r.First {
			runs = append(runs, obs.Run{Region: region, First: r.First, N: page - r.First, State: r.State})
		}
		if page+1 < r.First+r.N {
			runs = append(runs, obs.Run{Region: region, First: page + 1, N: r.First + r.N - page - 1, State: r.State})
		}
	}
	if st != 0 {
		runs = append(runs, obs.Run{Region: region, First: page, N: 1, State: st})
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].Region != runs[j].Region {
			return runs[i].Region < runs[j].Region
		}
		return runs[i].First < runs[j].First
	})
	v.Runs = runs
	if st != obs.Readable {
		var ws []obs.Word
		for _, w := range v.Words {
			if w.Region != region || int(w.Off/prog.PageSize) != page {
				ws = append(ws, w)
			}
		}
		v.Words = ws
		var ps []obs.PageDigest
		for _, d := range v.Pages {
			if d.Region != region || d.Page != page {
				ps = append(ps, d)
			}
		}
		v.Pages = ps
	}
}
