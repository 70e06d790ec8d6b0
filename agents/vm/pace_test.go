package vm

import (
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestPaceTimeout(t *testing.T) {
	base := time.Minute
	tests := []struct {
		name   string
		runs   []time.Duration // results of weight-10 programs
		weight float64
		want   time.Duration
	}{
		{"no measurement keeps the base", nil, 100, base},
		{"fast guest keeps the base", []time.Duration{time.Second}, 10, base},
		// 0.2 s per weight unit, 100 units, slack 8: 160 s.
		{"slow guest, heavy program scales", []time.Duration{2 * time.Second}, 100, 160 * time.Second},
		{"capped at 4x", []time.Duration{100 * time.Second}, 1000, 4 * base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pc pace
			for _, d := range tc.runs {
				pc.record(10, d)
			}
			got := pc.timeout(base, tc.weight)
			if got != tc.want {
				t.Errorf("timeout = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPaceAverages(t *testing.T) {
	var pc pace
	pc.record(1, 10*time.Second)
	pc.record(1, 0) // ignored
	pc.record(1, 20*time.Second)
	// 0.2*20 + 0.8*10 = 12 s per unit; slack 8, weight 1: 96 s.
	if got := pc.timeout(time.Second, 1); got != 4*time.Second {
		t.Errorf("capped timeout = %v, want 4s", got)
	}
	if got := pc.timeout(time.Minute, 1); got != 96*time.Second {
		t.Errorf("timeout = %v, want 96s", got)
	}
}

func TestProgramWeight(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1 thp=default\nfork f0\nwait f0\ncheck\n"))
	if err != nil {
		t.Fatal(err)
	}
	// 1 + fork (8) + wait (1) + check (1).
	if got := programWeight(p); got != 11 {
		t.Errorf("weight = %v, want 11", got)
	}
}
