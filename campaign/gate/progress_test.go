package gate

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
)

// Into a log (not a terminal) the gate writes a progress line every 10 s,
// not every second (600 lines in a 10-minute gate before).
func TestGateProgressLines(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 12 s gate")
	}
	tg := simTarget(t)
	var progress bytes.Buffer
	cfg := Config{
		Open:          func() (agents.Target, error) { return tg, nil },
		Kernel:        KernelIdentity{Target: "sim-eager"},
		Budget:        15 * time.Second,
		Seed:          7,
		Workdir:       filepath.Join(t.TempDir(), "w"),
		MinPrograms:   1,
		Progress:      &progress,
		ProgressLines: true,
	}
	r := Run(context.Background(), cfg)
	n := strings.Count(progress.String(), "progress: ")
	fuzz := r.phaseDuration("fuzz")
	// Every second, a 2+ s phase would print 2 lines or more (one is
	// allowed below 10 s). The phase can end early on a loaded machine
	// (CI ended it at 7.9 s once): its notes say why.
	if fuzz < 2*time.Second {
		t.Fatalf("the fuzz phase took %v: too short to tell (exit %d: %s)\n%s", fuzz, r.ExitCode, r.Reason, phaseNotes(r))
	}
	if n > int(fuzz/(10*time.Second))+1 {
		t.Fatalf("%d progress lines in a %v fuzz phase, want one per 10 s:\n%s", n, fuzz, progress.String())
	}
	if fuzz < 10*time.Second {
		t.Logf("the fuzz phase took %v of a 15 s budget (exit %d: %s)\n%s", fuzz, r.ExitCode, r.Reason, phaseNotes(r))
	}
}

// A clean gate fuzzes what is left of its budget but a wind-down (a
// twentieth): the time kept for a finding's minimization and fresh
// validation is fuzzed when no finding needs it (10-minute gates on the
// reference kernel ended 100 s early).
func TestGateCleanFuzzesItsBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 12 s gate")
	}
	cfg := Config{
		Open:    func() (agents.Target, error) { return simTarget(t), nil },
		Kernel:  KernelIdentity{Target: "sim-eager"},
		Budget:  12 * time.Second,
		Seed:    7,
		Workdir: filepath.Join(t.TempDir(), "w"),
	}
	r := Run(context.Background(), cfg)
	if r.ExitCode != ExitPass {
		t.Fatalf("exit %d: %s", r.ExitCode, r.Reason)
	}
	before := time.Duration(0)
	for _, p := range r.Phases {
		if p.Name == "fuzz" {
			break
		}
		before += p.Duration
	}
	left := cfg.Budget - 2*time.Second - before // the reporting reserve is 2 s
	if fuzz := r.phaseDuration("fuzz"); fuzz < left*85/100 {
		t.Fatalf("the fuzz phase took %v of the %v left after %v of earlier phases", fuzz, left, before)
	}
}

// phaseNotes lists a gate's phases with their notes, for a failing test.
func phaseNotes(r *Result) string {
	var b strings.Builder
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "  %s %v skipped=%q error=%q note=%q\n", p.Name, p.Duration, p.Skipped, p.Error, p.Note)
	}
	return b.String()
}
