package vm

import (
	"errors"
	"os"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/kernel/report"
)

// A child that exits at once with two huge PMDs it shares with the
// parent: on the rss-thp mutant its mm's MM_ANONPAGES counter is off by
// 1024 when the mm is freed ("BUG: Bad rss-counter state").
const lazyMMProg = `forkfuzz v1
region r0 anon-private pages=1024 thp=on
store r0 off=0x0 count=1024 stride=0x1000
madvise r0 off=0x0 len=0x400000 advice=collapse
fork f0
wait f0
`

const quietProg = "forkfuzz v1\nregion r0 anon-private pages=1 thp=off\nstore r0 off=0x0 count=1 stride=0x1000\ncheck\n"

// TestQEMUReportOnItsRun checks that a report printed when an exited
// child's mm is freed belongs to the program whose child it was, not to
// the next one (the CPU the child last ran on keeps its mm as a lazy TLB
// mm until it next runs a user task, and check_mm runs only then: the
// agent's dropLazyMMs guards against it; this test also passed 40 rounds
// without that guard, so it checks attribution, not the guard). It
// needs FORKFUZZ_MUTANTS_KERNEL, an image from `forkfuzz kernel build
// --mutants` (booted with forkfuzz_mutant=rss-thp).
func TestQEMUReportOnItsRun(t *testing.T) {
	needQEMU(t)
	image := os.Getenv("FORKFUZZ_MUTANTS_KERNEL")
	if image == "" {
		t.Skip("FORKFUZZ_MUTANTS_KERNEL is not set: this test needs a `forkfuzz kernel build --mutants` image (its rss-thp mutant prints Bad rss-counter state when a child's mm is freed)")
	}
	tg := bootTarget(t, image, nil, 0, &TargetFile{Cmdline: "forkfuzz_mutant=rss-thp"})
	p, q := mustParse(t, lazyMMProg), mustParse(t, quietProg)
	for i := 0; i < 5; i++ {
		_, err := tg.Run(p, agents.Options{})
		var kr *KernelReportError
		if !errors.As(err, &kr) || kr.Kind != string(report.RSS) {
			t.Fatalf("round %d: the rss-thp program gave %v, want its Bad rss-counter report", i, err)
		}
		if _, err := tg.Run(q, agents.Options{}); err != nil {
			t.Fatalf("round %d: the quiet program after it gave %v, want nothing (a report of the previous program's child, seen one run late?)", i, err)
		}
	}
}
