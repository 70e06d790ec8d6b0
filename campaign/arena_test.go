package campaign

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

func TestArenaWeights(t *testing.T) {
	w := gen.DefaultWeights()
	for _, tc := range []struct {
		name string
		t    agents.Target
		low  bool // generated programs may still be low
	}{
		{"no fork implementation", nil, true},
		{"stock", &agents.ForkImplTarget{Profile: "stock"}, true},
		{"async-fork", &agents.ForkImplTarget{Profile: "async-fork"}, false},
		{"odf", &agents.ForkImplTarget{Profile: "odf"}, false},
	} {
		got, note := ArenaWeights(tc.t, w)
		if low := got.ArenaLowProb > 0 || got.ArenaLowAimedProb > 0; low != tc.low {
			t.Errorf("%s: low arena allowed %v, want %v", tc.name, low, tc.low)
		}
		if tc.low != (note == "") {
			t.Errorf("%s: note %q", tc.name, note)
		}
		if !tc.low && !strings.Contains(note, "arena low") {
			t.Errorf("%s: the note does not name the placement: %q", tc.name, note)
		}
	}
}
