package vm

import "testing"

func TestSwapWanted(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		want    bool
	}{
		{"console=ttyS0 panic=-1", false},
		{"console=ttyS0 forkfuzz.swap=1 rdinit=/forkfuzz", true},
		{"forkfuzz.swap=0", false},
		{"forkfuzz.swap=10", false},
		{"xforkfuzz.swap=1", false},
	} {
		if got := swapWanted(c.cmdline); got != c.want {
			t.Errorf("swapWanted(%q) = %v, want %v", c.cmdline, got, c.want)
		}
	}
}
