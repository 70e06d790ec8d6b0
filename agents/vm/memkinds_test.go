package vm

import "testing"

func TestSwapMiB(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    int
	}{
		{"console=ttyS0 panic=-1", guestSwapMiBSmall},
		{"console=ttyS0 forkfuzz.swap=1 rdinit=/forkfuzz", guestSwapMiB},
		{"forkfuzz.swap=0", 0},
		{"forkfuzz.swap=10", guestSwapMiBSmall},
		{"xforkfuzz.swap=1", guestSwapMiBSmall},
	} {
		if got := swapMiB(c.cmdline); got != c.want {
			t.Errorf("swapMiB(%q) = %d, want %d", c.cmdline, got, c.want)
		}
	}
}
