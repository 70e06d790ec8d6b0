package checker

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker/internal/randprog"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestExpectedRandom: for random programs the model's own prediction
// passes Check, round-trips through the text format, and flipping any
// word of a view is caught.
func TestExpectedRandom(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 200
	}
	for seed := 0; seed < n; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		p := randprog.Build(r, 10+r.IntN(40))
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d: builder made an invalid program: %v\n%s", seed, err, p.Format())
		}
		o := Expected(p)
		if v := Check(p, o); !v.OK() {
			t.Fatalf("seed %d: expected observation rejected:\n%s\n%s", seed, p.Format(), v.Report())
		}
		if v := Check(p, Expected(p)); v.Stats.Lost != 0 {
			t.Fatalf("seed %d: model lost track on its own prediction", seed)
		}
		// Flip one word per view.
		for vi := range o.Views {
			ws := o.Views[vi].Words
			if len(ws) == 0 {
				continue
			}
			w := &ws[r.IntN(len(ws))]
			old := w.Value
			w.Value ^= 1 << 33
			if Check(p, o).OK() {
				t.Fatalf("seed %d: flipped word r%d+%#x in view %d not caught\n%s", seed, w.Region, w.Off, vi, p.Format())
			}
			w.Value = old
		}
	}
}

// TestDeterministic: Check is a pure function.
func TestDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	p := randprog.Build(r, 60)
	o := Expected(p)
	o.Views[len(o.Views)-1].Words = nil
	a := Check(p, o).Report()
	for i := 0; i < 3; i++ {
		if b := Check(p, o).Report(); a != b {
			t.Fatalf("reports differ:\n%s\n---\n%s", a, b)
		}
	}
}

// bigProg is a large program: 64 MiB of regions in four kinds, written all
// over, nested forks.
const bigProg = `forkfuzz v1
region r0 anon-private pages=8192 thp=on
region r1 anon-shared pages=4096
region r2 memfd-private pages=2048
region r3 memfd-shared pages=2048
store r0 off=0x0 count=8192 stride=0x1000
store r1 off=0x8 count=4096 stride=0x1000
pwrite r2 off=0x10 count=2048 stride=0x1000
store r3 off=0x18 count=2048 stride=0x1000
fork f0
store r0 off=0x20 count=8192 stride=0x1000
f0: store r0 off=0x28 count=4096 stride=0x2000
f0: fork f1
f1: check
f0: wait f1
wait f0
fork f2
madvise r0 off=0x0 len=0x2000000 advice=dontneed
mremap r2 off=0x0 len=0x800000 newlen=0x800000 flags=maymove|fixed to=r3 tooff=0x1000000
wait f2
`

// TestBig: the model accepts its own prediction of a large program (its
// speed is BenchmarkBigCheck's business, not a test's).
func TestBig(t *testing.T) {
	p := mustParse(t, bigProg)
	v := Check(p, Expected(p))
	if !v.OK() {
		t.Fatal(v.Report())
	}
	if v.Stats.Pages < 16384 {
		t.Errorf("only %d pages compared", v.Stats.Pages)
	}
}

// BenchmarkBigCheck: Check of the large program against its prediction.
func BenchmarkBigCheck(b *testing.B) {
	p, err := prog.Parse([]byte(bigProg))
	if err != nil {
		b.Fatal(err)
	}
	o := Expected(p)
	for b.Loop() {
		if v := Check(p, o); !v.OK() {
			b.Fatal(v.Report())
		}
	}
}

func BenchmarkCheckBig(b *testing.B) {
	p := mustParse(b, `forkfuzz v1
region r0 anon-private pages=16384 thp=on
store r0 off=0x0 count=16384 stride=0x1000
fork f0
store r0 off=0x8 count=16384 stride=0x1000
f0: check
wait f0
fork f1
wait f1
`)
	o := Expected(p)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !Check(p, o).OK() {
			b.Fatal("fails")
		}
	}
}

// FuzzCheck feeds random programs with perturbed observations: Check
// must never panic.
func FuzzCheck(f *testing.F) {
	f.Add(uint64(1), []byte{0, 1, 2, 3})
	f.Add(uint64(7), []byte("perturb the views and results of ops"))
	f.Add(uint64(99), []byte{255, 254, 253, 0, 0, 0, 9, 9, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		r := rand.New(rand.NewPCG(seed, 3))
		p := randprog.Build(r, 5+r.IntN(30))
		o := Expected(p)
		perturb(o, data)
		v := Check(p, o)
		_ = v.Report()
		_ = v.String()
	})
}

// perturb changes o as directed by data.
func perturb(o *obs.Observation, data []byte) {
	next := func() uint64 {
		if len(data) == 0 {
			return 0
		}
		var b [8]byte
		n := copy(b[:], data)
		data = data[min(n, 3):]
		return binary.LittleEndian.Uint64(b[:])
	}
	for len(data) > 0 {
		x := next()
		switch x % 16 {
		case 0:
			if len(o.Ops) > 0 {
				o.Ops[int(x>>8)%len(o.Ops)].Errno = int(int8(x >> 16))
			}
		case 1:
			if len(o.Ops) > 0 {
				o.Ops[int(x>>8)%len(o.Ops)].Ran = x&0x100000 != 0
			}
		case 2:
			if len(o.Ops) > 0 {
				o.Ops[int(x>>8)%len(o.Ops)].Ret = next()
			}
		case 3:
			if len(o.Ops) > 0 {
				o.Ops[int(x>>8)%len(o.Ops)].Skipped = int(int16(x >> 16))
			}
		case 4:
			if len(o.Views) > 0 {
				o.Views = append(o.Views[:int(x>>8)%len(o.Views)], o.Views[int(x>>8)%len(o.Views)+1:]...)
			}
		case 5:
			if len(o.Views) > 0 {
				o.Views = append(o.Views, o.Views[int(x>>8)%len(o.Views)])
			}
		case 6:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				v.Proc = int(int8(x >> 20))
				v.At = int(int16(x >> 28))
			}
		case 7, 8:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				v.Words = append(v.Words, obs.Word{Region: int(int8(x >> 16)), Off: next() % (2 * prog.SpanBytes), Value: next()})
			}
		case 9:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				if len(v.Words) > 0 {
					v.Words[int(x>>16)%len(v.Words)].Value = next()
				}
			}
		case 10:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				v.Runs = append(v.Runs, obs.Run{Region: int(int8(x >> 16)), First: int(int32(x >> 24)), N: int(int16(next())), State: obs.PageState(x >> 56)})
			}
		case 11:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				v.Pages = append(v.Pages, obs.PageDigest{Region: int(int8(x >> 16)), Page: int(int32(x >> 24)), Digest: next(), NonZero: int(int16(next()))})
			}
		case 12:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				v.Truncated = !v.Truncated
			}
		case 13:
			o.Truncated = !o.Truncated
		case 14:
			if len(o.Views) > 0 {
				v := &o.Views[int(x>>8)%len(o.Views)]
				v.VMAs = append(v.VMAs, obs.VMA{Start: next(), End: next(), Prot: string([]byte{byte(x >> 16), 'w', '-', 's', 'x'}[:int(x>>24)%6]), Offset: next()})
			}
		case 15:
			o.Events = append(o.Events, obs.Event{Kind: obs.EventKinds[int(x>>8)%len(obs.EventKinds)], Fork: int(x>>16)%8 - 1, Op: -1, Proc: -1, Thread: -1, Text: "fuzz"})
		}
	}
}
