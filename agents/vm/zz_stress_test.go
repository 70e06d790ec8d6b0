package vm

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestZZStress(t *testing.T) {
	files := os.Getenv("FORKFUZZ_STRESS_PROGS")
	if files == "" {
		t.Skip("FORKFUZZ_STRESS_PROGS not set")
	}
	n, _ := strconv.Atoi(os.Getenv("FORKFUZZ_STRESS_N"))
	needQEMU(t)
	tg := bootTarget(t, referenceKernel(t), nil, 0, nil)
	var progs []*prog.Program
	for _, f := range strings.Split(files, ",") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := prog.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, p)
	}
	for i := 0; i < n; i++ {
		for j, p := range progs {
			t0 := time.Now()
			o, err := tg.Run(p, agents.Options{})
			var ce *executor.CrashError
			if errors.As(err, &ce) {
				t.Logf("run %d prog %d: %v after %v\nSTDERR:\n%s\nSTATE:\n%s\nCONSOLE TAIL:\n%s", i, j, err, time.Since(t0), ce.Stderr, ce.State, lastBytes([]byte(ce.Console), 3000))
				continue
			}
			nst := 0
			if o != nil {
				for _, th := range o.Threads {
					nst += len(th.Stores) + th.Dropped + th.Trimmed
				}
			}
			t.Logf("run %d prog %d: err=%v in %v, thread stores %d", i, j, err, time.Since(t0), nst)
		}
	}
}
