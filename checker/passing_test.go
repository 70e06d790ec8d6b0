package checker

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestObservedPasses: observations recorded on correct kernels
// (testdata/passing: a program and what a real kernel did with it) pass.
// Each pair was once a false finding of the checker; the file's name says
// which rule it bit.
func TestObservedPasses(t *testing.T) {
	for _, r := range loadRecorded(t, "testdata/passing/*.ffz") {
		t.Run(strings.TrimSuffix(filepath.Base(r.file), ".ffz"), func(t *testing.T) {
			if v := Check(r.p, &r.o); !v.OK() {
				t.Errorf("%s on %s:\n%s", r.file, r.o.Kernel, v.Report())
			}
		})
	}
}
