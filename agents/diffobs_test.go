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

// An access into a child killed earlier races with the child's exit (a
// gate reported `procmem returned 0x9 vs 0x0` as an Async-fork finding):
// not compared; into a live child it is.
func TestDiffObservationsIntoKilledChild(t *testing.T) {
	for _, c := range []struct {
		text string
		diff bool
	}{
		{"fork f0\nkill f0\nprocmem r0 off=0x0 count=9 stride=0x8 into=f0\nwait f0\n", false},
		{"fork f0\nprocmem r0 off=0x0 count=9 stride=0x8 into=f0\nwait f0\n", true},
	} {
		p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\n" + c.text))
		if err != nil {
			t.Fatal(err)
		}
		mk := func(ret uint64) *obs.Observation {
			o := &obs.Observation{}
			for _, op := range p.Ops {
				r := obs.OpResult{Ran: true}
				if op.Kind == prog.OpProcMem {
					r.Ret = ret
				}
				o.Ops = append(o.Ops, r)
			}
			return o
		}
		if d := DiffObservations(p, mk(9), mk(0)); (d != "") != c.diff {
			t.Errorf("%q: DiffObservations = %q, want a difference: %v", c.text, d, c.diff)
		}
	}
}

// move_pages's count of pages it could not move depends on passing
// page references: not compared; its errno is.
func TestDiffObservationsMigrateCount(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nfork f0\nmigrate r0 off=0x0 len=0x4000\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(ret uint64, errno int) *obs.Observation {
		return &obs.Observation{Ops: []obs.OpResult{{Ran: true, Ret: 100}, {Ran: true, Ret: ret, Errno: errno}, {Ran: true}}}
	}
	if d := DiffObservations(p, mk(4, 0), mk(0, 0)); d != "" {
		t.Errorf("pages left 4 vs 0: DiffObservations = %q, want none", d)
	}
	if d := DiffObservations(p, mk(0, 12), mk(0, 0)); !strings.Contains(d, "op 1 (migrate): errno 12 vs 0") {
		t.Errorf("ENOMEM vs success: DiffObservations = %q, want the errno difference", d)
	}
}
