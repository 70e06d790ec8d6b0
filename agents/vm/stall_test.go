package vm

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestQEMUExecutorStall replays, FORKFUZZ_STALL=N times each on one VM
// of the reference kernel, the programs in testdata/executor-stall: on
// the unmodified kernel a 10-minute gate reported them as "executor died:
// in vm: unexpected EOF" (seed 7, program 62) and "executor hung" (seed
// 7, program 44), with no kernel report and 0/5 replays. Their writer
// threads stored until a late wait; under TCG the executor then held a
// 350-560 MB heap of thread logs and stopped answering go-plugin's
// keepalive. Every run must give an observation; a crash or hang is
// logged with the executor's stderr (a goroutine dump), state and
// console. It boots QEMU and takes minutes, so it runs only when
// FORKFUZZ_STALL is set:
//
//	FORKFUZZ_STALL=3 FORKFUZZ_TEST_KERNEL=.../bzImage-6.1.192-forkfuzz go test -run TestQEMUExecutorStall -v ./agents/vm
func TestQEMUExecutorStall(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("FORKFUZZ_STALL"))
	if err != nil || n <= 0 {
		t.Skip("minutes of QEMU: set FORKFUZZ_STALL=N to replay the stalling programs N times")
	}
	needQEMU(t)
	files, _ := filepath.Glob("testdata/executor-stall/*.ffz")
	if len(files) == 0 {
		t.Fatal("no programs in testdata/executor-stall")
	}
	var progs []*prog.Program
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := prog.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		progs = append(progs, p)
	}
	tg := bootTarget(t, referenceKernel(t), nil, 0, nil)
	failed := 0
	for i := 0; i < n; i++ {
		for j, p := range progs {
			t0 := time.Now()
			o, err := tg.Run(p, agents.Options{})
			var ce *executor.CrashError
			if errors.As(err, &ce) {
				failed++
				t.Errorf("run %d of %s: %v after %v\n--- executor stderr ---\n%s\n--- executor state ---\n%s\n--- console ---\n%s",
					i, filepath.Base(files[j]), err, time.Since(t0).Round(time.Millisecond), lastBytes([]byte(ce.Stderr), 16<<10), ce.State, lastBytes([]byte(ce.Console), 4<<10))
				continue
			}
			if err != nil && o == nil {
				t.Fatalf("run %d of %s: harness error: %v", i, filepath.Base(files[j]), err)
			}
			stores := 0
			for _, th := range o.Threads {
				stores += len(th.Stores) + th.Trimmed + th.Dropped
			}
			t.Logf("run %d of %s: %v in %v, %d thread stores", i, filepath.Base(files[j]), err, time.Since(t0).Round(time.Millisecond), stores)
		}
	}
	t.Logf("%d of %d runs made the executor die or hang", failed, n*len(progs))
}
