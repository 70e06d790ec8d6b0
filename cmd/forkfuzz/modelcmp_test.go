package main

import (
	"strings"
	"testing"
)

// TestModelcmp: the host kernel agrees with the simulated Async-fork on a
// few programs (exit 0); a simulated kernel with a catalogued bug does not
// (exit 1, unexplained classes); bad flags exit 2.
func TestModelcmp(t *testing.T) {
	if code, out, errs := forkfuzz(t, "modelcmp", "--programs", "5", "--seed", "1"); code != exitClean || !strings.Contains(out, "5 programs compared with the simulated async fork") {
		t.Errorf("host vs model: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, out, errs := forkfuzz(t, "modelcmp", "--target", "sim", "--fork", "eager", "--mutant", "eager-no-wrprotect", "--programs", "30", "--seed", "1")
	if code != exitFindings || !strings.Contains(out, "UNEXPLAINED") {
		t.Errorf("mutant vs model: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	for _, c := range []struct{ args, want string }{
		{"--model cow", `unknown`},
		{"--profile nope", "--profile"},
		{"--programs 0", "--programs 0: want a number > 0"},
	} {
		code, _, errs := forkfuzz(t, append([]string{"modelcmp"}, strings.Fields(c.args)...)...)
		if code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %s", c.args, code, errs)
		}
	}
}
