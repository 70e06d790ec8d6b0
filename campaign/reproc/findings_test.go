package reproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestFindingDirHasReproC: a saved finding directory holds repro.c for its
// (minimized) program, and it builds; a program the translator refuses
// gets no repro.c and the finding is still saved.
func TestFindingDirHasReproC(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0 count=4 stride=0x1000\nfork f0\nf0: check\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	refused := &prog.Program{Ops: []prog.Op{{Kind: prog.OpStore, Region: 3, Count: 1, Stride: 8}}} // invalid
	s := &campaign.FindingStore{Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(s.Dir, "findings"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := s.Save(&campaign.Finding{Issue: judge.Issue{Signature: "memory:test", Oracle: "memory"}, Program: p, Minimized: p})
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(filepath.Join(dir, "repro.c"))
	if err != nil {
		t.Fatalf("no repro.c in the finding directory: %v", err)
	}
	if !strings.Contains(string(c), "store r0 off=0x0 count=4 stride=0x1000") {
		t.Fatalf("repro.c does not carry the program:\n%.500s", c)
	}
	if _, err := exec.LookPath("gcc"); err == nil {
		if out, err := exec.Command("gcc", "-O2", "-pthread", "-fsyntax-only", filepath.Join(dir, "repro.c")).CombinedOutput(); err != nil {
			t.Fatalf("repro.c does not compile: %v\n%s", err, out)
		}
	}
	dir2, err := s.Save(&campaign.Finding{Issue: judge.Issue{Signature: "mapping:test", Oracle: "mapping"}, Program: refused})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir2, "program.ffz")); err != nil {
		t.Fatalf("refused program: finding not saved: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir2, "repro.c")); err == nil {
		t.Fatal("a program the translator refuses got a repro.c")
	}
}
