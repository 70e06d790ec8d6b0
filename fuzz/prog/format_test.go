package prog

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseExampleRoundTrip(t *testing.T) {
	text, err := os.ReadFile("testdata/example.ffz")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Regions) != 4 || len(p.Ops) != 17 {
		t.Fatalf("got %d regions, %d ops", len(p.Regions), len(p.Ops))
	}
	if op := p.Ops[7]; op.Kind != OpMremap || op.Flags != MremapMaymove|MremapFixed || op.To != 1 || op.ToOff != 0x8000 {
		t.Fatalf("mremap parsed wrong: %+v", op)
	}
	if op := p.Ops[8]; op.Proc != 1 || op.Kind != OpStore {
		t.Fatalf("child store parsed wrong: %+v", op)
	}
	q, err := Parse(p.Format())
	if err != nil {
		t.Fatalf("reparse: %v\n%s", err, p.Format())
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip differs:\n%s\n%s", p.Format(), q.Format())
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line, col  int
		msg        string
	}{
		{"no header", "region r0 anon-private pages=1\n", 1, 1, "expected header"},
		{"bad version", "forkfuzz v9\n", 1, 10, "unsupported format version"},
		{"bad kind", "forkfuzz v1\nregion r0 anon-weird pages=1\n", 2, 11, "unknown region kind"},
		{"region order", "forkfuzz v1\nregion r1 anon-private pages=1\n", 2, 8, "numbered in order"},
		{"bad number", "forkfuzz v1\nregion r0 anon-private pages=12x\n", 2, 30, "bad number"},
		{"missing arg", "forkfuzz v1\nregion r0 anon-private pages=1\nmunmap r0 off=0\n", 3, 11, "missing argument len="},
		{"unknown op", "forkfuzz v1\nregion r0 anon-private pages=1\n  frob r0\n", 3, 3, "unknown operation"},
		{"migrate with until", "forkfuzz v1\nregion r0 anon-private pages=1\nmigrate r0 off=0 len=0x1000 until=f0\n", 3, 29, `unknown argument "until"`},
		{"migrateloop without until", "forkfuzz v1\nregion r0 anon-private pages=1\nt1: migrateloop r0 off=0 len=0x1000\n", 3, 26, "missing argument until="},
		{"unknown key", "forkfuzz v1\nregion r0 anon-private pages=1\nstore r0 off=0 colour=red\n", 3, 16, "unknown argument"},
		{"bad advice", "forkfuzz v1\nregion r0 anon-private pages=1\nmadvise r0 off=0 len=1 advice=nap\n", 3, 31, "unknown value"},
		{"bad flag", "forkfuzz v1\nregion r0 anon-private pages=1\nmremap r0 off=0 len=1 newlen=1 flags=maymove|zoom\n", 3, 46, "unknown mremap flag"},
		{"bad prefix", "forkfuzz v1\nregion r0 anon-private pages=1\nx3: check\n", 3, 1, "expected f<number>"},
		{"bad arena", "forkfuzz v1\narena middle\nregion r0 anon-private pages=1\n", 2, 7, `unknown arena "middle"`},
		{"arena after region", "forkfuzz v1\nregion r0 anon-private pages=1\narena low\n", 3, 1, "arena after the first region"},
		{"second arena", "forkfuzz v1\narena low\narena top\nregion r0 anon-private pages=1\n", 3, 1, "second arena line"},
		{"arena without word", "forkfuzz v1\narena\nregion r0 anon-private pages=1\n", 2, 1, "arena needs one word"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("want SyntaxError, got %v", err)
			}
			if se.Line != tc.line || se.Col != tc.col || !strings.Contains(se.Msg, tc.msg) {
				t.Fatalf("got %v, want %d:%d: ...%s", err, tc.line, tc.col, tc.msg)
			}
		})
	}
}

func TestValidateErrors(t *testing.T) {
	hdr := "forkfuzz v1\nregion r0 anon-private pages=4\nregion r1 anon-shared pages=1\n"
	for _, tc := range []struct{ name, ops, msg string }{
		{"unwaited fork", "fork f0\n", "never waited"},
		{"fork order", "fork f1\nwait f1\n", "numbered in order"},
		{"child before fork", "f0: check\nfork f0\nwait f0\n", "not forked yet"},
		{"child after wait", "fork f0\nwait f0\nf0: check\n", "already waited"},
		{"wait from wrong proc", "fork f0\nfork f1\nf0: wait f1\nwait f0\nwait f1\n", "must run in the process that forked it"},
		{"grandchild not reaped", "fork f0\nf0: fork f1\nwait f0\n", "never waited for"},
		{"pwrite on anon", "pwrite r0 off=0\n", "needs a memfd region"},
		{"store past span", "store r0 off=0x7fffff8 count=2\n", "past the region span"},
		{"unaligned store", "store r0 off=0x3\n", "multiples of 8"},
		{"no region", "munmap r7 off=0 len=1\n", "no region r7"},
		{"to without fixed", "mremap r0 off=0 len=0x1000 newlen=0x1000 to=r1\n", "need the fixed flag"},
		{"join behind a loop", "t1: storeloop r0 off=0 until=f0\nfork f0\njoin t1\nwait f0\n", "would wait forever"},
		{"loop behind a loop", "t1: storeloop r0 off=0 until=f0\nfork f0\nt1: storeloop r0 off=0 until=f0\nwait f0\n", "would wait forever"},
		{"loop on main thread", "fork f0\nstoreloop r0 off=0 until=f0\nwait f0\n", "must run on a thread"},
		{"migrateloop on main thread", "fork f0\nmigrateloop r0 off=0 len=0x1000 until=f0\nwait f0\n", "migrateloop must run on a thread"},
		{"migrateloop until unwaited", "t1: migrateloop r0 off=0 len=0x1000 until=f0\nfork f0\nwait f0\njoin t1\nt1: migrateloop r0 off=0 len=0x1000 until=f0\njoin t1\n", "until=f0: that fork must be waited for"},
		{"join behind a migrateloop", "t1: migrateloop r0 off=0 len=0x1000 until=f0\nfork f0\njoin t1\nwait f0\n", "t1's migrateloop (op 0) runs until wait f0"},
		{"migrate unaligned", "migrate r0 off=0x10 len=0x1000\n", "migrate needs a page-aligned off"},
		{"migrate empty", "migrate r0 off=0 len=0\n", "non-zero page-multiple len"},
		{"migrate too long", "migrate r0 off=0 len=0x201000\n", "migrate of 513 pages: at most 512"},
		{"migrate past span", "migrate r0 off=0x7fff000 len=0x2000\n", "runs past the region span"},
		{"migrate no region", "migrate r3 off=0 len=0x1000\n", "no region r3"},
		{"fork on a thread", "t1: fork f0\nwait f0\n", "must run on the main thread"},
		{"procmem into unforked", "procmem r0 off=0 into=f0\nfork f0\nwait f0\n", "must have been forked by this process"},
		{"pvwrite into waited", "fork f0\nwait f0\npvwrite r0 off=0 into=f0\n", "must have been forked by this process"},
		{"pvwrite into grandchild", "fork f0\nf0: fork f1\npvwrite r0 off=0 into=f1\nf0: wait f1\nwait f0\n", "must have been forked by this process"},
		{"odirect unaligned", "odirect r0 off=0x10 len=0x1000\n", "page-aligned"},
		{"odirect too long", "odirect r0 off=0 len=0x11000\n", "at most 16"},
		{"vmsplice pipe full", "vmsplice r0 off=0 len=0x10000 pipe=p0\nvmsplice r0 off=0 len=0x1000 pipe=p0\n", "pipe would be full"},
		{"bad pipe", "readpipe p4\n", "out of range"},
		{"uringread without reg", "uringread r0 off=0 len=0x1000\n", "inside the range of the last uringreg"},
		{"uringread outside reg", "uringreg r0 off=0 len=0x1000\nuringread r0 off=0x1000 len=0x1000\n", "inside the range"},
		{"uring in child", "fork f0\nf0: uringreg r0 off=0 len=0x1000\nwait f0\n", "only in the main process"},
		{"pinned op on thread", "t1: vmsplice r0 off=0 len=0x1000 pipe=p0\n", "main thread"},
		{"into from a thread", "fork f0\nt1: procmem r0 off=0 into=f0\nwait f0\n", "main thread"},
		{"join of a thread that never ran", "store r0 off=0\njoin t3\n", "join t3: thread t3 runs no operation before it"},
		{"join before the thread's first op", "join t1\nt1: store r0 off=0\njoin t1\n", "join t1: thread t1 runs no operation"},
		{"thread never joined", "t2: store r0 off=0\nstore r0 off=0x8\n", "thread t2 is never joined"},
		{"thread op after its join", "t2: store r0 off=0\njoin t2\nt2: store r0 off=0x8\n", "thread t2 is never joined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(hdr + tc.ops))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want error containing %q", err, tc.msg)
			}
			if !strings.Contains(err.Error(), "line ") && !strings.Contains(err.Error(), "never waited") {
				t.Fatalf("error does not name the line: %v", err)
			}
		})
	}
}

func TestParsePinnedRoundTrip(t *testing.T) {
	text, err := os.ReadFile("testdata/pinned.ffz")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]Op{
		2: {Kind: OpVmsplice, Region: 0, Off: 0x1000, Len: 0x2000, Pipe: 1},
		4: {Kind: OpProcMem, Region: 0, Off: 0x10, Count: 2, Stride: 0x1000, Into: 1},
		9: {Proc: 1, Kind: OpReadPipe, Pipe: 1},
	}
	for i, w := range want {
		if p.Ops[i] != w {
			t.Errorf("op %d = %+v, want %+v", i, p.Ops[i], w)
		}
	}
	q, err := Parse(p.Format())
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip: %v\n%s", err, p.Format())
	}
}

func TestSlotValue(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {5, 77}, {4095, 65535}} {
		v := SlotValue(c[0], c[1])
		op, k, ok := DecodeSlotValue(v)
		if !ok || op != c[0] || k != c[1] || v == 0 {
			t.Fatalf("SlotValue(%d,%d)=%#x decodes to %d,%d,%v", c[0], c[1], v, op, k, ok)
		}
	}
	if _, _, ok := DecodeSlotValue(0); ok {
		t.Fatal("zero decodes as a slot value")
	}
}

// FuzzParse checks that Parse never panics, and that whatever it accepts
// round-trips exactly.
func FuzzParse(f *testing.F) {
	if text, err := os.ReadFile("testdata/example.ffz"); err == nil {
		f.Add(text)
	}
	f.Add([]byte("forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nf0: check\nwait f0\n"))
	f.Add([]byte("forkfuzz v1\narena low\nregion r0 anon-private pages=2\nfork f0\nwait f0\n"))
	f.Add([]byte("forkfuzz v1\nregion r0 memfd-private pages=3 thp=on\npwrite r0 off=0x10 count=3 stride=0x1000\n"))
	if text, err := os.ReadFile("testdata/pinned.ffz"); err == nil {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if _, err := RoundTrip(text); err != nil {
			t.Fatal(err)
		}
	})
}

func TestArenaRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		text  string
		arena Arena
		canon string // Format's output, "" if the same as text
	}{
		{"forkfuzz v1\narena low\nregion r0 anon-private pages=2 thp=default\n", ArenaLow, ""},
		{"forkfuzz v1\nregion r0 anon-private pages=2 thp=default\n", ArenaTop, ""},
		{"forkfuzz v1\narena top\nregion r0 anon-private pages=2 thp=default\n", ArenaTop, "forkfuzz v1\nregion r0 anon-private pages=2 thp=default\n"},
	} {
		p, err := Parse([]byte(tc.text))
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if p.Arena != tc.arena {
			t.Errorf("%q: arena %v, want %v", tc.text, p.Arena, tc.arena)
		}
		want := tc.canon
		if want == "" {
			want = tc.text
		}
		if got := string(p.Format()); got != want {
			t.Errorf("%q: Format = %q, want %q", tc.text, got, want)
		}
		if q := p.Clone(); q.Arena != p.Arena {
			t.Errorf("Clone lost the arena: %v", q.Arena)
		}
	}
}

func TestArenaAddresses(t *testing.T) {
	for _, tc := range []struct {
		a          Arena
		real, want uint64
	}{
		{ArenaTop, ArenaBase + 5, ArenaBase + 5},
		{ArenaLow, LowArenaBase, ArenaBase},
		{ArenaLow, LowArenaBase + 3*SpanBytes + 0x1000, Base(3) + 0x1000},
		{ArenaLow, LowArenaBase - 1, LowArenaBase - 1},                                       // below: unchanged
		{ArenaLow, LowArenaBase + MaxRegions*SpanBytes, LowArenaBase + MaxRegions*SpanBytes}, // end: unchanged
		{ArenaLow, ArenaBase, ArenaBase},                                                     // not in the low arena
	} {
		if got := tc.a.Canonical(tc.real); got != tc.want {
			t.Errorf("%v.Canonical(%#x) = %#x, want %#x", tc.a, tc.real, got, tc.want)
		}
		if tc.want != tc.real {
			if back := tc.a.Real(tc.want); back != tc.real {
				t.Errorf("%v.Real(%#x) = %#x, want %#x", tc.a, tc.want, back, tc.real)
			}
		}
	}
	if got := ArenaLow.RegionBase(2); got != LowArenaBase+2*SpanBytes {
		t.Errorf("RegionBase(2) = %#x", got)
	}
	if ArenaLow.End() > ArenaBase {
		t.Errorf("the low arena overlaps the top one")
	}
}
