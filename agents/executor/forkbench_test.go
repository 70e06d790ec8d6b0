package executor

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestForkBench forks a process holding 8 MiB of touched memory and checks
// that every measured quantity is there and plausible.
func TestForkBench(t *testing.T) {
	for _, thp := range []bool{false, true} {
		s, err := ForkBench(ForkBenchSpec{SizeBytes: 8 << 20, THP: thp, Reps: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 2 {
			t.Fatalf("thp=%v: %d samples, want 2", thp, len(s))
		}
		for _, x := range s {
			if x.Fork <= 0 || x.ChildReady <= 0 || x.StallTotal <= 0 || x.StallMax <= 0 || x.ChildRead <= 0 {
				t.Errorf("thp=%v: a quantity is not positive: %+v", thp, x)
			}
			if x.StallMax > x.StallTotal {
				t.Errorf("thp=%v: slowest write %d > total %d", thp, x.StallMax, x.StallTotal)
			}
			if x.Fork > 10e9 {
				t.Errorf("thp=%v: fork of 8 MiB took %d ns", thp, x.Fork)
			}
		}
	}
	// Pinned pages (an io_uring fixed buffer): fork copies them; the
	// measurement runs as without.
	if s, err := ForkBench(ForkBenchSpec{SizeBytes: 4 << 20, Reps: 1, PinBytes: 64 << 10}); err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			t.Logf("io_uring not available here: %v", err)
		} else {
			t.Errorf("pin 64K: %v", err)
		}
	} else if len(s) != 1 || s[0].Fork <= 0 || s[0].ChildRead <= 0 {
		t.Errorf("pin 64K: %+v", s)
	}
	if _, err := ForkBench(ForkBenchSpec{SizeBytes: 3 << 20}); err == nil {
		t.Error("a size that is not a multiple of 2 MiB was accepted")
	}
}
