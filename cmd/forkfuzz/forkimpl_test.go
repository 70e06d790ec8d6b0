package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

func TestForkImplFlags(t *testing.T) {
	if code, out, errs := forkfuzz(t, "exec", "--fork-impl", "stock", "testdata/clean.ffz"); code != exitClean || !strings.Contains(out, "ok") {
		t.Errorf("--fork-impl stock: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !slices.Contains(executor.AvailableForkImpls(), "async-fork") {
		code, _, errs := forkfuzz(t, "exec", "--fork-impl", "async-fork", "testdata/clean.ffz")
		if code != exitError || !strings.Contains(errs, "--fork-impl async-fork: the native target's kernel does not have it (no /sys/fs/cgroup/memory.async_fork") {
			t.Errorf("async-fork on a kernel without it: exit %d, stderr: %s", code, errs)
		}
	}
	for _, c := range []struct{ args, want string }{
		{"--differential", "--differential needs --fork-impl"},
		{"--fork-impl prctl65", `unknown fork implementation "prctl65"`},
		{"--target sim --fork-impl stock", "target cannot switch fork implementations"},
	} {
		args := append([]string{"exec"}, strings.Fields(c.args)...)
		code, _, errs := forkfuzz(t, append(args, "testdata/clean.ffz")...)
		if code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr: %s (want %q)", c.args, code, errs, c.want)
		}
	}
}

// TestReplayCarriesForkImpl: a finding's replay command keeps the fork
// implementation (without it a replay would fork the stock way and pass).
func TestReplayCarriesForkImpl(t *testing.T) {
	code, out, errs := forkfuzz(t, "exec", "--json", "--fork-impl", "stock", "testdata/clean.ffz")
	if code != exitClean {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "--fork-impl stock") {
		t.Fatalf("the replay command lacks --fork-impl:\n%s", out)
	}
}
