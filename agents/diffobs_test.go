package agents

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The differential compares what the two runs did, except what differs
// between any two runs: fork's pid, and where a move the arena had no
// room for landed (outside the arena, among the Go runtime's mappings; a
// gate on a good kernel reported `mremap returned 0x7fce..189000 vs
// 0x7fce..179000` as an Async-fork finding).
func TestDiffObservationsMremapOutsideArena(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nfork f0\nmremap r0 off=0x0 len=0x1000 newlen=0x2000 flags=maymove\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	in := uint64(prog.ArenaBase + 5*prog.SpanBytes)
	for _, c := range []struct {
		name string
		a, b uint64
		diff bool
	}{
		{"both outside the arena", 0x7fceae189000, 0x7fceae179000, false},
		{"both at one place in the arena", in, in, false},
		{"two places in the arena", in, in + 0x1000, true},
		{"inside against outside", in, 0x7fceae179000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func(ret uint64) *obs.Observation {
				return &obs.Observation{Ops: []obs.OpResult{{Ran: true, Ret: 100}, {Ran: true, Ret: ret}, {Ran: true}}}
			}
			d := DiffObservations(p, mk(c.a), mk(c.b))
			if (d != "") != c.diff || c.diff && !strings.Contains(d, "op 1 (mremap): returned") {
				t.Errorf("DiffObservations = %q, want a difference: %v", d, c.diff)
			}
		})
	}
}
