package campaign

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// bugOnFirstFork is a kernel whose Async-fork BUGs on the first fork of
// the calibration program, then works (the reference model's
// prediction): the kernel on which `run --fork-impl async-fork` once
// ended with exit 2 and saved nothing.
type bugOnFirstFork struct{ runs atomic.Int64 }

func (b *bugOnFirstFork) Name() string        { return "bug-on-first-fork" }
func (b *bugOnFirstFork) Close() error        { return nil }
func (b *bugOnFirstFork) ForkImpls() []string { return []string{"stock", "async-fork"} }
func (b *bugOnFirstFork) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if b.runs.Add(1) == 1 {
		return nil, &agents.RecordedEvent{OracleName: "kernel-bug", Sig: "kernel-bug/kernel-BUG-in-__copy_page_range",
			Text: "kernel BUG at mm/memory.c:1020!", Message: "kernel: kernel BUG in __copy_page_range",
			Attachments: map[string]string{"console.txt": "[ 3.1] kernel BUG at mm/memory.c:1020!\n"}}
	}
	return checker.Expected(p), nil
}

// A kernel that breaks on the calibration program's first fork is a
// finding, saved like any other (program, console, report), and the
// campaign stops there: before, it was a harness error (exit 2) and
// nothing was written.
func TestCalibrationFindingSaved(t *testing.T) {
	tg := &bugOnFirstFork{}
	ft, err := agents.NewForkImplTarget(tg, "async-fork", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ft.Calibrate(); err != nil {
		t.Fatalf("calibration: %v (the kernel's BUG must be kept as a finding, not end the campaign)", err)
	}
	if !strings.Contains(ft.Calibration, "saved as a finding") {
		t.Fatalf("calibration note %q", ft.Calibration)
	}
	dir := t.TempDir()
	var log bytes.Buffer
	st, err := Run(context.Background(), Config{Target: ft, Seed: 3, Programs: 20, Workdir: dir, Log: &log, MinimizeRuns: 3,
		TargetArgs: []string{"--target", "qemu", "--fork-impl", "async-fork"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if st.Findings != 1 || st.Events != 1 || len(st.Saved) != 1 {
		t.Fatalf("findings %d, failing runs %d, saved %v\n%s", st.Findings, st.Events, st.Saved, log.String())
	}
	if tg.runs.Load() > 1+3+5+5 {
		t.Fatalf("%d runs: the campaign did not stop after saving the calibration finding\n%s", tg.runs.Load(), log.String())
	}
	for _, name := range []string{"program.ffz", "console.txt", "report.txt", "signature"} {
		if _, err := os.Stat(filepath.Join(st.Saved[0], name)); err != nil {
			t.Errorf("finding lacks %s: %v", name, err)
		}
	}
	rep, _ := os.ReadFile(filepath.Join(st.Saved[0], "report.txt"))
	if !strings.Contains(string(rep), "calibration") || !strings.Contains(string(rep), "--fork-impl async-fork") {
		t.Errorf("report does not say where the program came from or how to replay it:\n%s", rep)
	}
	t.Logf("%s\n%s", log.String(), rep)
	if !strings.Contains(log.String(), "before the first program") {
		t.Errorf("log does not say the campaign stopped:\n%s", log.String())
	}
}
