package gen

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const unitsProg = `region r0 anon-private pages=4
store r0 off=0x0
fork f0
f0: store r0 off=0x8
f0: fork f1
f1: check
f0: wait f1
fork f2
kill f2
munmap r0 off=0x0 len=0x1000
wait f0
wait f2
check
`

func TestUnit(t *testing.T) {
	p := mustParse(t, unitsProg)
	for _, tc := range []struct {
		op   int
		want []int
	}{
		{0, []int{0}},
		{1, []int{1, 2, 3, 4, 5, 9}}, // f0 with its child and grandchild
		{3, []int{3, 4, 5}},          // f1 inside f0's child
		{6, []int{6, 7, 10}},         // f2 with its kill and wait
		{7, []int{7}},                // the kill alone
		{8, []int{8}},
	} {
		if got := Unit(p, tc.op); !slices.Equal(got, tc.want) {
			t.Errorf("Unit(op %d) = %v, want %v", tc.op, got, tc.want)
		}
	}
	if n := len(Units(p)); n != len(p.Ops)-3 { // every op but the 3 waits
		t.Errorf("%d units, want %d", n, len(p.Ops)-3)
	}
}

func TestRemoveOpsRenumbers(t *testing.T) {
	p := mustParse(t, unitsProg)
	drop := make([]bool, len(p.Ops))
	for _, i := range Unit(p, 1) {
		drop[i] = true
	}
	q := RemoveOps(p, drop)
	want := mustParse(t, `region r0 anon-private pages=4
store r0 off=0x0
fork f0
kill f0
munmap r0 off=0x0 len=0x1000
wait f0
check
`)
	if !equal(q, want) {
		t.Fatalf("got\n%s\nwant\n%s", q.Format(), want.Format())
	}
}

// TestRemoveEveryUnit checks that removing any one unit of a generated
// program leaves a valid program.
func TestRemoveEveryUnit(t *testing.T) {
	r, _ := testRand(t)
	for i := 0; i < iters(500); i++ {
		p := Generate(r, DefaultWeights())
		for _, u := range Units(p) {
			drop := make([]bool, len(p.Ops))
			for _, j := range u {
				drop[j] = true
			}
			q := RemoveOps(p, drop)
			if err := q.Validate(); err != nil {
				t.Fatalf("removing %v: %v\n%s", u, err, p.Format())
			}
			// A fork's unit may start with a storeloop that runs until it.
			head := u[0]
			if last := u[len(u)-1]; p.Ops[last].Kind == prog.OpJoin {
				head = last // a join's unit holds the operations it joins
			}
			for _, j := range u {
				if p.Ops[j].Kind == prog.OpFork {
					head = j
					break
				}
			}
			if want := Unit(p, head); !slices.Equal(u, want) {
				t.Fatalf("Units gives %v, Unit gives %v\n%s", u, want, p.Format())
			}
		}
	}
}

func TestRepairTable(t *testing.T) {
	anon := prog.Region{Kind: prog.AnonPrivate, Pages: 4}
	memfd := prog.Region{Kind: prog.MemfdShared, Pages: 4}
	store := func(proc int) prog.Op { return prog.Op{Proc: proc, Kind: prog.OpStore, Count: 1, Stride: 8} }
	fork := func(proc, f int) prog.Op { return prog.Op{Proc: proc, Kind: prog.OpFork, Fork: f} }
	wait := func(proc, f int) prog.Op { return prog.Op{Proc: proc, Kind: prog.OpWait, Fork: f} }
	for _, tc := range []struct {
		name string
		in   *prog.Program
		want string
	}{
		{"no regions", &prog.Program{}, "region r0 anon-private pages=1 thp=default\n"},
		{"unwaited fork", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{fork(0, 0), store(1)}},
			"fork f0\nf0: store r0 off=0x0 count=1 stride=0x8\nwait f0\n"},
		{"child op before fork", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{store(1), fork(0, 0), wait(0, 0)}},
			"fork f0\nwait f0\n"},
		{"child op after wait", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{fork(0, 0), wait(0, 0), store(1)}},
			"fork f0\nwait f0\n"},
		{"fork ids out of order", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{fork(0, 7), store(8), wait(0, 7)}},
			"fork f0\nf0: store r0 off=0x0 count=1 stride=0x8\nwait f0\n"},
		{"grandchild not reaped", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{fork(0, 0), fork(1, 1), wait(0, 0)}},
			"fork f0\nf0: fork f1\nf0: wait f1\nwait f0\n"},
		{"wait from the wrong process", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{fork(0, 0), fork(0, 1), wait(1, 1), wait(0, 0)}},
			"fork f0\nfork f1\nwait f0\nwait f1\n"},
		{"pwrite to anon", &prog.Program{Regions: []prog.Region{anon, memfd}, Ops: []prog.Op{{Kind: prog.OpPwrite, Count: 1, Stride: 8}}},
			"pwrite r1 off=0x0 count=1 stride=0x8\n"},
		{"pwrite without memfd", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{{Kind: prog.OpPwrite, Count: 0, Stride: 3, Off: 13}}},
			"store r0 off=0x8 count=1 stride=0x8\n"},
		{"region out of range", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{{Kind: prog.OpMunmap, Region: 5, Len: 1 << 40}}},
			"munmap r0 off=0x0 len=0x8000000\n"},
		{"stray fields", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{{Kind: prog.OpCheck, Region: 3, Len: 9}, {Kind: prog.OpMremap, Len: 0x1000, NewLen: 0x2000, To: 2, ToOff: 5}}},
			"check\nmremap r0 off=0x0 len=0x1000 newlen=0x2000 flags=none\n"},
		{"store past span", &prog.Program{Regions: []prog.Region{anon}, Ops: []prog.Op{{Kind: prog.OpStore, Off: prog.SpanBytes - 16, Count: 10, Stride: 8}}},
			"store r0 off=0x7fffff0 count=2 stride=0x8\n"},
		{"bad enums", &prog.Program{Regions: []prog.Region{{Kind: 9, Pages: 0, THP: 7}}, Ops: []prog.Op{{Kind: 200}, {Kind: prog.OpMadvise, Advice: 99}}},
			"madvise r0 off=0x0 len=0x0 advice=" + prog.Advice(99%prog.NumAdvices).String() + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Repair(tc.in)
			checkProgram(t, q, "repair")
			got := opsText(q)
			if tc.name == "no regions" {
				got = string(q.Format()[len("forkfuzz v1\n"):])
			}
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// opsText returns the operation lines of p's text.
func opsText(p *prog.Program) string {
	var b strings.Builder
	for _, op := range p.Ops {
		b.WriteString(op.String() + "\n")
	}
	return b.String()
}

func TestRepairKeepsValidPrograms(t *testing.T) {
	r, _ := testRand(t)
	for i := 0; i < iters(2000); i++ {
		p := Generate(r, DefaultWeights())
		if q := Repair(p); !equal(p, q) {
			t.Fatalf("Repair changed a valid program:\n%s\n---\n%s", p.Format(), q.Format())
		}
	}
}

// TestRepairGarbage repairs programs with random fields everywhere.
func TestRepairGarbage(t *testing.T) {
	r, _ := testRand(t)
	for i := 0; i < iters(5000); i++ {
		checkProgram(t, Repair(garbage(r)), "repair garbage")
	}
}

func garbage(r *rand.Rand) *prog.Program {
	p := &prog.Program{}
	for n := r.IntN(prog.MaxRegions + 3); n > 0; n-- {
		p.Regions = append(p.Regions, prog.Region{Kind: prog.RegionKind(r.IntN(prog.NumRegionKinds + 2)), Pages: r.IntN(prog.MaxRegionPages*2) - 5, THP: prog.THP(r.IntN(prog.NumTHPs + 2))})
	}
	num := func() uint64 {
		switch r.IntN(3) {
		case 0:
			return r.Uint64()
		case 1:
			return uint64(r.IntN(prog.SpanBytes * 2))
		}
		return uint64(r.IntN(8)) * prog.PageSize
	}
	for n := r.IntN(60); n > 0; n-- {
		p.Ops = append(p.Ops, prog.Op{
			// Every value of every enum and a few past the end (which
			// Repair must clamp), from the descriptor tables' counts.
			Proc: r.IntN(6) - 1, Kind: prog.OpKind(r.IntN(prog.NumOpKinds + 2)), Region: r.IntN(20) - 2,
			Off: num(), Len: num(), Count: r.IntN(prog.MaxCount*2) - 10, Stride: num(),
			Prot: prog.Prot(r.IntN(prog.NumProts + 2)), Advice: prog.Advice(r.IntN(prog.NumAdvices + 4)), NewLen: num(),
			Flags: prog.MremapFlags(r.IntN(1 << (prog.NumMremapFlags + 1))), To: r.IntN(20) - 2, ToOff: num(), Fork: r.IntN(6) - 1,
			Thread: r.IntN(prog.MaxThreads+2) - 1, Peer: r.IntN(prog.MaxThreads+2) - 1,
			Pipe: r.IntN(prog.MaxPipes+2) - 1, Into: r.IntN(6) - 1,
		})
	}
	return p
}
