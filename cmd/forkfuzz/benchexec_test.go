package main

import (
	"regexp"
	"strings"
	"testing"
)

// bench exec runs a fixed set of programs under each configuration and
// prints programs/s side by side with the ratio to everything on.
func TestBenchExec(t *testing.T) {
	code, out, errs := forkfuzz(t, "bench", "exec", "--target", "sim", "--programs", "3", "--rounds", "1")
	if code != exitClean {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if !regexp.MustCompile(`(?m)^all on +3 `).MatchString(out) {
		t.Errorf("output lacks the all-on row with 3 runs:\n%s", out)
	}
	for _, want := range []string{"3 programs (seed 1, profile default) x 1 rounds", "1.00x", "no kcov", "no census", "neither", "1 word/view"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
