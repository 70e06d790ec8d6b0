package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
)

// TestQEMUSnapshot: the first boot saves the VM's state; a restart after
// a kernel panic loads it instead of booting, and the VM runs programs;
// a second target on the same kernel starts from it; a state QEMU cannot
// load is said, removed, and followed by a cold boot.
func TestQEMUSnapshot(t *testing.T) {
	needQEMU(t)
	image := referenceKernel(t)
	dir := t.TempDir()
	// HangTimeout: generous, so that a guest slowed by other VMs shows
	// its panic before the hang detector fires (docs/qemu.md).
	cfg := Config{Kernel: image, Agent: staticAgent(t), Accel: "auto", Workdir: t.TempDir(), SnapshotDir: dir,
		HangTimeout: 90 * time.Second, BootTimeout: 90 * time.Second, Log: testLog{t}}
	tg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if tg.Restores != 0 || tg.snap.saved() == nil {
		t.Fatalf("after a cold boot: %d restores, saved state %v (%s)", tg.Restores, tg.snap.saved(), tg.snap.off)
	}
	boot := tg.Boots[0]
	sysrqCrash(t, tg, "snapshot") // runs programs after the restart
	if tg.Restores != 1 {
		t.Fatalf("the restart after the panic: %d restores, want 1", tg.Restores)
	}
	t.Logf("cold boot %v, restart from the saved state %v", boot.Round(time.Millisecond), tg.Boots[len(tg.Boots)-1].Round(time.Millisecond))
	cons, err := os.ReadFile(filepath.Join(cfg.Workdir, "vm-0", "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cons), "the console of the boot whose state was loaded") || !strings.Contains(string(cons), "Linux version") {
		t.Errorf("the restored VM's console lacks the saved boot's console")
	}
	tg.Close()

	// A later run on the same kernel starts from the saved state.
	cfg.Workdir = t.TempDir()
	tg2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tg2.Restores != 1 {
		t.Errorf("a second target on the same kernel: %d restores, want 1", tg2.Restores)
	}
	if _, err := tg2.Run(mustParse(t, testProg), agents.Options{}); err != nil {
		t.Fatalf("run on the restored VM: %v", err)
	}
	tg2.Close()

	// A state QEMU cannot load: said, removed, and a cold boot.
	if err := os.WriteFile(tg2.snap.statePath(), []byte("not a VM state"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	cfg.Workdir, cfg.Log = t.TempDir(), &log
	tg3, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg3.Close()
	if tg3.Restores != 0 || !strings.Contains(log.String(), "could not load the saved state") || !strings.Contains(log.String(), "saved the booted state") {
		t.Errorf("a broken state: %d restores, log:\n%s", tg3.Restores, log.String())
	}
	if _, err := tg3.Run(mustParse(t, testProg), agents.Options{}); err != nil {
		t.Fatalf("run after the cold boot: %v", err)
	}
}

// A state QEMU could not load is removed; one whose restored agent was
// only slow to answer (a loaded machine) is kept for later runs. Either
// way the rest of the run boots cold.
func TestRestoreFailedKeepsSlowStates(t *testing.T) {
	for _, c := range []struct {
		err  error
		kept bool
	}{
		{&slowRestore{errors.New("no message from the restored agent within 30s")}, true},
		{fmt.Errorf("restore: %w", &slowRestore{errors.New("agent connection broke: EOF")}), true},
		{errors.New("QEMU exited (exit status 1) qemu-system-x86_64: load of migration failed"), false},
	} {
		s := &snapshots{dir: t.TempDir(), key: "k"}
		for _, p := range []string{s.statePath(), s.metaPath()} {
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s.restoreFailed(c.err)
		_, err := os.Stat(s.statePath())
		if kept := err == nil; kept != c.kept || !s.failed {
			t.Errorf("%v: state kept %v (want %v), failed %v", c.err, kept, c.kept, s.failed)
		}
	}
}
