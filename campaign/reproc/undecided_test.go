package reproc

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestUndecidedExit3: a run that leaves the model's predicted path
// before any failure (here an O_DIRECT operation the machine cannot do:
// the scratch directory does not exist) exits 3, UNDECIDED, never 0: the
// failure a finding reports may lie after the divergence. With the
// scratch file available, the same program passes (0) where the file
// system supports O_DIRECT, or is undecided again where it does not.
func TestUndecidedExit3(t *testing.T) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=4 thp=off
store r0 off=0x0 count=4 stride=0x1000
odirect r0 off=0x1000 len=0x1000
fork f0
f0: check
store r0 off=0x0 count=1 stride=0x1000
wait f0
check
`))
	if err != nil {
		t.Fatal(err)
	}
	src, err := Translate(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bin := build(t, src)
	t.Setenv("FORKFUZZ_SCRATCH", "/nonexistent/forkfuzz-scratch-dir")
	code, out := runC(t, bin)
	if code != exitUndecided || !strings.Contains(out, "result: UNDECIDED") || !strings.Contains(out, "could not be done here") || strings.Contains(out, "FAIL") {
		t.Fatalf("without a scratch file: exit %d, want %d (UNDECIDED)\n%s", code, exitUndecided, out)
	}
	scratch := t.TempDir()
	t.Setenv("FORKFUZZ_SCRATCH", scratch)
	code, out = runC(t, bin)
	if code != 0 && code != exitUndecided {
		t.Fatalf("with a scratch file: exit %d, want 0 or %d\n%s", code, exitUndecided, out)
	}
	t.Logf("with a scratch file in %s: exit %d", scratch, code)
}
