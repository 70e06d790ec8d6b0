package checker

import (
	"flag"
	"os"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestGoldenReport pins the wording of a report with several oracles
// failing at once (run with -update after a deliberate change).
func TestGoldenReport(t *testing.T) {
	p := mustParse(t, `forkfuzz v1
region r0 anon-private pages=4 thp=on
region r1 anon-shared pages=1
region r2 memfd-private pages=2
store r0 off=0x0 count=4 stride=0x1000
madvise r2 off=0x0 len=0x2000 advice=dontfork
fork f0
store r0 off=0x1008 count=1
store r1 off=0x0 count=1
f0: store r0 off=0x10 count=1
f0: check
wait f0
madvise r2 off=0x0 len=0x1000 advice=free
check
`)
	o := Expected(p)
	start := findView(t, o, 1, obs.AtStart)
	setWord(start, 0, 0x1008, prog.SlotValue(3, 0)) // parent's post-fork store leaks into the child
	setWord(start, 0, 0x2000, 0)                    // a pre-fork store is lost
	setState(start, 2, 0, obs.Readable)             // the DONTFORK mapping is inherited
	setWord(findView(t, o, 0, 9), 1, 0, 0)          // the parent's shared store is gone
	o.Ops[8].Errno = 0                              // MADV_FREE on a memfd mapping "succeeds"
	o.Ops[7].Ret = 0x86                             // the child died of SIGABRT
	got := Check(p, o).Report()
	const file = "testdata/report.golden"
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (run with -update if intended):\n%s", file, got)
	}
}
