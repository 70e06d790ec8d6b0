package cover

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const kallsyms = `ffffffff81000000 T _stext
ffffffff81100000 T copy_page_range
ffffffff81100400 t copy_pte_range.isra.0
ffffffff81100800 T schedule
ffffffff81100900 D some_data
ffffffff81100a00 T dup_mmap
ffffffff81100c00 T vfs_read
`

func TestSymbols(t *testing.T) {
	s, err := ParseSymbols("k", strings.NewReader(kallsyms))
	if err != nil {
		t.Fatal(err)
	}
	for pc, want := range map[uint64]string{
		0xffffffff81100010: "copy_page_range", 0xffffffff81100410: "copy_pte_range.isra.0",
		0xffffffff81100950: "schedule", 0xffffffff81100a08: "dup_mmap", 0xffffffff81000001: "_stext",
	} {
		if got, _ := s.Func(pc); got != want {
			t.Errorf("Func(%#x) = %q, want %q", pc, got, want)
		}
	}
	if _, ok := s.Func(0x1000); ok {
		t.Errorf("a PC below every symbol has a function")
	}
	for fn, want := range map[string]string{"copy_pte_range.isra.0": "mm/memory.c", "dup_mmap": "kernel/fork.c", "schedule": "", "vfs_read": ""} {
		if got := ForkMMFile(fn); got != want {
			t.Errorf("ForkMMFile(%q) = %q, want %q", fn, got, want)
		}
	}
	if _, err := ParseSymbols("bad", strings.NewReader("zz T x\n")); err == nil || !strings.Contains(err.Error(), "bad:1") {
		t.Errorf("bad address: %v", err)
	}
	if _, err := ParseSymbols("hidden", strings.NewReader("0000000000000000 T x\n")); err == nil {
		t.Errorf("hidden addresses accepted")
	}
}

func TestTracker(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "c.csv")
	tr, err := Open(dir, "k1", true, csv)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetSymbols(kallsyms); err != nil {
		t.Fatal(err)
	}
	p1 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nwait f0\n")
	p2 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=2\nfork f0\nwait f0\n")
	c1 := &obs.Coverage{PCs: []uint64{0xffffffff81100010, 0xffffffff81100950}, Edges: []uint32{1, 2}}
	if g, err := tr.Add(p1, c1); err != nil || g != (Gain{NewEdges: 2, NewMM: 1}) {
		t.Fatalf("first program: gain %+v, %v", g, err)
	}
	if g, _ := tr.Add(p2, c1); g.NewEdges != 0 {
		t.Errorf("same edges again: gain %+v", g)
	}
	c2 := &obs.Coverage{PCs: []uint64{0xffffffff81100a08}, Edges: []uint32{3}}
	if g, _ := tr.Add(p2, c2); g != (Gain{NewEdges: 1, NewMM: 1}) {
		t.Errorf("new edge: gain %+v", g)
	}
	if g, _ := tr.Add(p2, &obs.Coverage{Unavailable: "no KCOV"}); g != (Gain{}) {
		t.Errorf("unavailable coverage: gain %+v", g)
	}
	got := tr.Counts()
	if got != (Counts{PCs: 3, Edges: 3, ForkMMPCs: 2, Corpus: 2, Symbols: true}) {
		t.Errorf("counts %+v", got)
	}
	if !strings.Contains(tr.Status(), "fork/mm 2 states 0 corpus 2 (guided, 25% from corpus)") {
		t.Errorf("status %q", tr.Status())
	}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	fresh := 0
	for i := 0; i < 200; i++ {
		f := tr.Draw(r)
		if f == Fresh {
			fresh++
			continue
		}
		seen[string(tr.Program(f).Format())] = true
	}
	if len(seen) != 2 {
		t.Errorf("Draw drew %d distinct programs of 2", len(seen))
	}
	if fresh < 120 || fresh > 180 {
		t.Errorf("%d of 200 draws fresh before any credit, want about 150 (a quarter from the corpus)", fresh)
	}
	tr.Close()
	b, _ := os.ReadFile(csv)
	if lines := strings.Count(string(b), "\n"); lines != 5 {
		t.Errorf("csv has %d lines, want header + 4:\n%s", lines, b)
	}
	// Reopened: the corpus and the totals come back, symbols too.
	tr2, err := Open(dir, "k1", false, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := tr2.Counts(); got != (Counts{PCs: 3, Edges: 3, ForkMMPCs: 2, Corpus: 2, Symbols: true}) {
		t.Errorf("reopened counts %+v", got)
	}
	for i := 0; i < 20; i++ {
		if f := tr2.Draw(r); f != Fresh {
			t.Fatalf("a blind tracker drew corpus entry %d", f)
		}
	}
	var out bytes.Buffer
	if err := Report(&out, dir, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 programs, 3 PCs, 3 edges", "fork/mm (kernel/fork.c, mm/*.c): 2 PCs in 2 functions; other kernel code: 1 PCs in 1 functions",
		"kernel/fork.c                dup_mmap", "mm/memory.c                  copy_page_range"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if err := Report(&out, t.TempDir(), ReportOptions{}); err == nil {
		t.Errorf("report of an empty workdir: no error")
	}
}

func TestTrackerUnavailable(t *testing.T) {
	tr, err := Open(t.TempDir(), KernelID("", "6.1.0"), true, "")
	if err != nil {
		t.Fatal(err)
	}
	p := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nwait f0\n")
	tr.Add(p, &obs.Coverage{Unavailable: "no KCOV (open /sys/kernel/debug/kcov: no such file or directory)"})
	if s := tr.Status(); s != "coverage: unavailable (no KCOV (open /sys/kernel/debug/kcov: no such file or directory))" {
		t.Errorf("status %q", s)
	}
	if !strings.HasSuffix(tr.Dir, "release-6.1.0") {
		t.Errorf("dir %s", tr.Dir)
	}
}

func mustParse(t *testing.T, s string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
