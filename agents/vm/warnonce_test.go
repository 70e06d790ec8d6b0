package vm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The agent re-arms once-only warnings before every program through
// clear_warn_once, and says in its hello when it cannot (then replays on
// the VM that warned cannot show such a warning again). The real kernel's
// side is checked by the mutants benchmark's file-private-writable row
// (docs/mutbench.md): its WARN_ON_ONCE replays.
func TestRearmWarnings(t *testing.T) {
	old := clearWarnOncePath
	defer func() { clearWarnOncePath = old }()
	dir := t.TempDir()
	clearWarnOncePath = filepath.Join(dir, "clear_warn_once")
	if err := os.WriteFile(clearWarnOncePath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := &agent{}
	if step := a.openWarnOnce(); !strings.Contains(step, "re-armed before every program") {
		t.Fatalf("hello step %q", step)
	}
	for range 3 {
		if err := a.rearmWarnings(); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(clearWarnOncePath); string(b) != "1\n1\n1\n" {
		t.Errorf("clear_warn_once got %q, want each program's write of 1", b)
	}

	clearWarnOncePath = filepath.Join(dir, "absent")
	b := &agent{}
	if step := b.openWarnOnce(); !strings.Contains(step, "cannot re-arm them") || !strings.Contains(step, "fires once per boot") {
		t.Errorf("hello step without the file: %q", step)
	}
	if err := b.rearmWarnings(); err != nil {
		t.Errorf("without the file: %v", err)
	}

	// A write that fails is said once; then the agent stops trying.
	clearWarnOncePath = filepath.Join(dir, "clear_warn_once")
	c := &agent{}
	c.openWarnOnce()
	c.warnOnce.Close() // the next write fails
	if err := c.rearmWarnings(); err == nil {
		t.Error("a failed write: no error")
	}
	if err := c.rearmWarnings(); err != nil || c.warnOnce != nil {
		t.Errorf("after a failed write: %v, file %v: want no more tries", err, c.warnOnce)
	}
}
