package hostcmp

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// An operation the kernel's target skipped for a capability it lacks
// (here CONFIG_ANON_VMA_NAME on the host) is not compared with the
// simulated kernel's answer; one it ran is.
func TestDiffsSkippedByTarget(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 memfd-shared pages=4\nanonname r0 off=0x0 len=0x1000 name=a\n"))
	if err != nil {
		t.Fatal(err)
	}
	model := &obs.Observation{Ops: []obs.OpResult{{Ran: true, Errno: 9}}}
	skipped := &obs.Observation{Ops: []obs.OpResult{{Ran: true, Skip: "anonymous VMA names need CONFIG_ANON_VMA_NAME"}}}
	if d := Diffs(p, skipped, model); len(d) != 0 {
		t.Errorf("a skipped operation was compared: %+v", d)
	}
	ran := &obs.Observation{Ops: []obs.OpResult{{Ran: true}}}
	if d := Diffs(p, ran, model); len(d) == 0 {
		t.Error("errno 0 against EBADF of an operation that ran: no difference")
	}
}
