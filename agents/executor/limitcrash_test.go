package executor

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestArmedRuntimeOOM(t *testing.T) {
	armed := limitArmedMarker + " (fork f0)\n"
	lifted := limitLiftedMarker + "\n"
	newosproc := "runtime: failed to create new OS thread (have 9 already; errno=12)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n\ngoroutine 0 gp=0x1 m=3 mp=0x2 [idle]:\n"
	for _, c := range []struct {
		name, stderr, want string
	}{
		{"newosproc while armed", armed + newosproc, "runtime: may need to increase max user processes (ulimit -u) / fatal error: newosproc"},
		{"heap while armed", "x\n" + armed + "runtime: out of memory: cannot allocate 4194304-byte block (3 in use)\nfatal error: out of memory\n", "runtime: out of memory: cannot allocate 4194304-byte block (3 in use) / fatal error: out of memory"},
		{"sysMap while armed", armed + "fatal error: runtime: out of memory\n", "fatal error: runtime: out of memory"},
		{"after the limit was lifted", armed + lifted + newosproc, ""},
		{"no limit armed", newosproc, ""},
		{"armed again", armed + lifted + armed + newosproc, "runtime: may need to increase max user processes (ulimit -u) / fatal error: newosproc"},
		{"another fatal error while armed", armed + "fatal error: concurrent map writes\n", ""},
		{"a panic while armed", armed + "panic: runtime error: index out of range\n", ""},
		{"only the first fatal error counts", armed + "fatal error: concurrent map writes\nfatal error: out of memory\n", ""},
		{"empty", "", ""},
	} {
		if got := armedRuntimeOOM(c.stderr); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func FuzzArmedRuntimeOOM(f *testing.F) {
	f.Add(limitArmedMarker + "\nfatal error: newosproc\n")
	f.Add(limitArmedMarker + "\n" + limitLiftedMarker + "\nfatal error: out of memory\n")
	f.Fuzz(func(t *testing.T, s string) {
		got := armedRuntimeOOM(s)
		if got == "" {
			return
		}
		if !strings.Contains(got, "fatal error: ") || !containsAny(got, runtimeOOM) || !strings.Contains(s, limitArmedMarker) {
			t.Fatalf("%q from %q", got, s)
		}
	})
}

// After spareThreads(n), n goroutines that lock threads at the same time
// find them idle: the runtime creates none of them while a limit is
// armed. The runtime may start a thread of its own meanwhile (a P handed
// off around the test's own system calls: one was seen in CI), so two new
// threads are allowed; without spareThreads the eight locks make about
// eight.
func TestSpareThreads(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const n = 8
	spareThreads(n)
	before := taskCount(t)
	release := make(chan struct{})
	locked := make(chan struct{}, n)
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			locked <- struct{}{}
			<-release
		}()
	}
	for range n {
		<-locked
	}
	during := taskCount(t)
	close(release)
	if during > before+2 {
		t.Fatalf("threads %d before, %d with %d locked after spareThreads(%d): want at most two new threads", before, during, n, n)
	}
	// And the first call does create what is missing.
	spareThreads(before + 2)
	if after := taskCount(t); after < before+2 {
		t.Fatalf("threads %d after spareThreads(%d): want at least %d", after, before+2, before+2)
	}
}

func taskCount(t *testing.T) int {
	t.Helper()
	time.Sleep(10 * time.Millisecond)
	d, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skipf("no /proc/self/task: %v", err)
	}
	return len(d)
}
