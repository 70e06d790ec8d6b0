package cow

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
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
	var refused []string
	for _, c := range Cases() {
		if c.Missing != "" {
			continue
		}
		p, err := c.Parse()
		if err != nil {
			t.Fatal(err)
		}
		o, runErr := x.Run(p, executor.Options{})
		if agents.Refused(runErr) {
			// The hugetlb kinds, where the host reserves no huge
			// pages (TestQEMUCowMatrix runs them in a VM).
			refused = append(refused, c.File)
			continue
		}
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
	if len(refused) > 0 {
		t.Logf("NOT RUN on the host: %d programs need free 2 MiB hugetlb pages, which the host does not have (/proc/sys/vm/nr_hugepages): %v", len(refused), refused)
	}
}

// TestHostPipeOracleBites: the vmsplice programs are judged by the pipe
// oracle (the simulated kernel does not model vmsplice, so
// TestSimMutants cannot show it). Each host observation is falsified the
// way the bug cow.c looks for would show (CVE-2020-29374: the pipe
// returns the other side's post-fork write instead of the spliced data,
// word 0 of the range) and must then fail that oracle.
func TestHostPipeOracleBites(t *testing.T) {
	x, err := executor.New()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range Cases() {
		if c.Missing != "" || !strings.HasPrefix(c.Body.Name, "vmsplice") {
			continue
		}
		p, err := c.Parse()
		if err != nil {
			t.Fatal(err)
		}
		o, err := x.Run(p, executor.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.File, err)
		}
		read, write := -1, -1
		for i, op := range p.Ops {
			switch op.Kind {
			case prog.OpReadPipe:
				read = i
			case prog.OpStore:
				write = i // the last store: cow.c's modification on the other side
			}
		}
		r := &o.Ops[read]
		if len(r.Data) == 0 || r.Data[0].Off != 0 {
			t.Fatalf("%s: readpipe read no word 0: %+v", c.File, r.Data)
		}
		r.Data[0].Value = prog.SlotValue(write, 0)
		v, err := judge.Judge(p, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.OK() || v.Issues[0].Oracle != checker.OraclePipe {
			t.Errorf("%s: a pipe holding the other side's write was judged %v", c.File, v.Signatures())
			continue
		}
		if n == 0 {
			t.Logf("%s, falsified: %s", c.File, v.Issues[0].Explanation)
		}
		n++
	}
	if n != 4*10 {
		t.Errorf("%d vmsplice programs bit, want 40", n)
	}
}
