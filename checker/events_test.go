package checker

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// TestEveryEventKindHasARule: a new event kind cannot reach the checker
// without a decision about what it means.
func TestEveryEventKindHasARule(t *testing.T) {
	if len(obs.EventKinds) != obs.NumEventKinds {
		t.Fatalf("obs.EventKinds has %d kinds, NumEventKinds says %d", len(obs.EventKinds), obs.NumEventKinds)
	}
	for _, k := range obs.EventKinds {
		if _, ok := eventRules[k]; !ok {
			t.Errorf("event kind %q has no rule in eventRules", k)
		}
	}
	if len(eventRules) != len(obs.EventKinds) {
		t.Errorf("eventRules has %d entries for %d kinds", len(eventRules), len(obs.EventKinds))
	}
}
