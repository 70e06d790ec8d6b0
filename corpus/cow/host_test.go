package cow

import (
	"os"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker/judge"
)

// TestMain re-executes the test binary with the GODEBUG setting the
// executor needs.
func TestMain(m *testing.M) {
	if err := executor.ReexecWithGODEBUG(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestHost runs every cow.c program on the host kernel with the real
// executor: every oracle must pass, and the pinned operations must have
// run (a skipped uringreg or vmsplice would test nothing).
// (All 87 take under a second.)
func TestHost(t *testing.T) {
	x, err := executor.New()
	if err != nil {
		t.Fatal(err)
	}
	start, n := time.Now(), 0
	for _, c := range Cases() {
		if c.Missing != "" {
			continue
		}
		p, err := c.Parse()
		if err != nil {
			t.Fatal(err)
		}
		o, runErr := x.Run(p, executor.Options{})
		v, err := judge.Judge(p, o, runErr)
		if err != nil {
			t.Fatalf("%s: judge: %v", c.File, err)
		}
		n++
		if !v.OK() {
			t.Errorf("%s (%s):\n%s", c.File, c.Run, v.Report())
			continue
		}
		for _, s := range v.Skipped {
			t.Errorf("%s: op %d `%s` skipped: %s", c.File, s.Op, s.Text, s.Reason)
		}
		if v.Judged.Views == 0 || v.Judged.Pages == 0 {
			t.Errorf("%s: nothing judged: %+v", c.File, v.Judged)
		}
		held, _ := Held(&c, o)
		t.Logf("%s: ok (%d ops, %d views, %d pages); %s", c.File, v.Judged.Ops, v.Judged.Views, v.Judged.Pages, held)
	}
	t.Logf("%d cow.c programs passed on the host in %v", n, time.Since(start).Round(time.Millisecond))
}
