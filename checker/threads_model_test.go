package checker

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestThreadsWild: words a thread may be writing are not judged by the
// sequential model, in the main process and in children forked meanwhile;
// other words still are.
func TestThreadsWild(t *testing.T) {
	p := mustParse(t, `forkfuzz v1
region r0 anon-private pages=4
region r1 anon-private pages=2
store r0 off=0x0 count=4 stride=0x1000
t1: storeloop r0 off=0x8 count=4 stride=0x1000 until=f0
fork f0
f0: check
t2: munmap r1 off=0x0 len=0x1000
wait f0
join t1
join t2
check
`)
	o := Expected(p)
	if v := Check(p, o); !v.OK() {
		t.Fatalf("clean:\n%s", v.Report())
	}
	// Thread values anywhere in the loop's slots are fine.
	child := findView(t, o, 1, obs.AtStart)
	setWord(child, 0, 0x1008, prog.SlotValue(1, 12345))
	setWord(findView(t, o, 0, 8), 0, 0x2008, prog.SlotValue(1, 99))
	if v := Check(p, o); !v.OK() {
		t.Fatalf("wild words or pending thread munmap judged:\n%s", v.Report())
	}
	// A word the threads never write is still judged.
	setWord(child, 0, 0x1000, 0)
	if v := Check(p, o); v.OK() {
		t.Fatal("lost pre-fork store not caught")
	}
}
