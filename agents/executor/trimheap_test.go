package executor

import (
	"runtime"
	"runtime/debug"
	"testing"
)

var trimSink []byte

// Garbage left by a program that ran with the collector off (writer
// threads) is collected and returned to the kernel before the next
// program, so that its forks do not copy its page tables.
func TestTrimHeap(t *testing.T) {
	old := debug.SetGCPercent(-1)
	for i := 0; i < 3*heapTrim>>20; i++ {
		trimSink = make([]byte, 1<<20)
		trimSink[len(trimSink)-1] = 1
	}
	trimSink = nil
	debug.SetGCPercent(old)
	before := residentHeap()
	if before <= heapTrim {
		t.Fatalf("%d MiB of heap resident after %d MiB of garbage: the test did not fill it", before>>20, 3*heapTrim>>20)
	}
	trimHeap()
	after := residentHeap()
	t.Logf("resident heap: %d MiB before, %d MiB after", before>>20, after>>20)
	if after > heapTrim {
		t.Fatalf("resident heap %d MiB after trimHeap, want at most %d", after>>20, heapTrim>>20)
	}
	// Under the bound, nothing is done (no forced collection per program).
	n := numGC()
	trimHeap()
	if numGC() != n {
		t.Fatalf("trimHeap collected with %d MiB resident, under its %d MiB bound", residentHeap()>>20, heapTrim>>20)
	}
}

func numGC() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

func TestStatusKB(t *testing.T) {
	status := []byte("Name:\tforkfuzz\nVmPTE:\t     464 kB\nRssAnon:\t   18320 kB\nBad:\tx kB\nEmpty:\n")
	for _, tt := range []struct {
		key  string
		want int64
	}{
		{"RssAnon:", 18320}, {"VmPTE:", 464}, {"VmSwap:", -1}, {"Bad:", -1}, {"Empty:", -1},
	} {
		if got := statusKB(status, tt.key); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.key, got, tt.want)
		}
	}
	if m := executorMem(); m == nil || m.RssAnonKB <= 0 || m.HeapKB <= 0 {
		t.Errorf("executorMem() = %+v: this process's RssAnon and heap should be positive", m)
	}
}

// TestReleaseStack: after growStack, releaseStack leaves the stack grown
// but hands back the pages growStack zeroed: RssAnon drops by most of
// stackReserve, and the goroutine can still use its whole stack.
func TestReleaseStack(t *testing.T) {
	done := make(chan [3]int64)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		growStack(stackReserve)
		before := executorMem().RssAnonKB
		releaseStack()
		after := executorMem().RssAnonKB
		growStack(stackReserve) // faults the released pages in again
		done <- [3]int64{before, after, executorMem().RssAnonKB}
	}()
	r := <-done
	t.Logf("RssAnon: %d kB grown, %d kB released, %d kB grown again", r[0], r[1], r[2])
	if r[0]-r[1] < stackReserve/1024/2 {
		t.Errorf("releaseStack freed %d kB of a %d kB stack, want at least half", r[0]-r[1], stackReserve/1024)
	}
}
