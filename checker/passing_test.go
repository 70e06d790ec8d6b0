package checker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// TestObservedPasses: observations recorded on correct kernels
// (testdata/passing: a program and what a real kernel did with it) pass.
// Each pair was once a false finding of the checker; the file's name says
// which rule it bit.
func TestObservedPasses(t *testing.T) {
	files, _ := filepath.Glob("testdata/passing/*.ffz")
	if len(files) == 0 {
		t.Fatal("no testdata/passing/*.ffz")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".ffz"), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p := mustParse(t, string(text))
			b, err := os.ReadFile(strings.TrimSuffix(f, ".ffz") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var o obs.Observation
			if err := json.Unmarshal(b, &o); err != nil {
				t.Fatalf("%s.json: %v", strings.TrimSuffix(f, ".ffz"), err)
			}
			if v := Check(p, &o); !v.OK() {
				t.Errorf("%s on %s:\n%s", f, o.Kernel, v.Report())
			}
		})
	}
}
