package hosttest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestDump runs the programs in the file $SCRATCH (separated by "====" lines)
// on the host and prints their results, views and VMAs: a tool for
// comparing the model with Linux by eye.
func TestDump(t *testing.T) {
	path := os.Getenv("SCRATCH")
	if path == "" {
		t.Skip("SCRATCH not set")
	}
	x, err := executor.New()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, text := range strings.Split(string(b), "====\n") {
		p, err := prog.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		o, err := x.Run(p, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("-----")
		for i, r := range o.Ops {
			fmt.Printf("op %2d %-60s ran=%v errno=%d ret=%#x skipped=%d\n", i, p.Ops[i].String(), r.Ran, r.Errno, r.Ret, r.Skipped)
		}
		for _, v := range o.Views {
			fmt.Printf("view proc=%d at=%d trunc=%v\n", v.Proc, v.At, v.Truncated)
			for _, vm := range v.VMAs {
				fmt.Printf("  vma %#x-%#x %s off=%#x ino=%d\n", vm.Start, vm.End, vm.Prot, vm.Offset, vm.Inode)
			}
			for _, r := range v.Runs {
				fmt.Printf("  run r%d [%d,+%d) %v\n", r.Region, r.First, r.N, r.State)
			}
			for i, w := range v.Words {
				if i > 40 {
					fmt.Printf("  ... %d words\n", len(v.Words))
					break
				}
				op, k, _ := prog.DecodeSlotValue(w.Value)
				fmt.Printf("  r%d+%#x = op%d[%d]\n", w.Region, w.Off, op, k)
			}
		}
		for _, e := range o.Events {
			fmt.Println("event:", e)
		}
		_ = obs.Readable
	}
}
