package simbench

import (
	"os"
	"testing"
	"time"
)

// TestHuntMutants runs a bounded campaign against every mutant. Each must
// be detected within the budget (SIM_HUNT_BUDGET, default 20s).
func TestHuntMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("long: campaigns against every mutant")
	}
	budget := 20 * time.Second
	if s := os.Getenv("SIM_HUNT_BUDGET"); s != "" {
		budget, _ = time.ParseDuration(s)
	}
	for _, r := range HuntAll(testWriter{t}, -1, HuntConfig{Seed: 1, Budget: budget}) {
		if !r.Detected {
			t.Errorf("mutant %s not detected within %v", r.Mutant.Name, budget)
		} else {
			t.Logf("%s: minimized reproducer:\n%s%s", r.Mutant.Name, r.Minimized.Format(), r.MinText)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
