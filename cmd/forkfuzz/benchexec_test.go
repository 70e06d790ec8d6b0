package main

import (
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
	for _, want := range []string{"3 programs (seed 1, profile default) x 1 rounds", "all on          3", "1.00x", "no kcov", "no census", "neither"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
