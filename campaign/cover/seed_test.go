package cover

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// keptCorpus makes a workdir whose corpus of one build holds two
// programs with coverage and kallsyms, as a campaign leaves it.
func keptCorpus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tr, err := Open(dir, "00112233aabbccdd", true, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetSymbols(kallsyms); err != nil {
		t.Fatal(err)
	}
	p1 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nwait f0\n")
	p2 := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=2\nfork f0\nwait f0\n")
	tr.Add(p1, &obs.Coverage{PCs: []uint64{0xffffffff81100010, 0xffffffff81100950}, Edges: []uint32{1, 2}})
	tr.Add(p2, &obs.Coverage{PCs: []uint64{0xffffffff81100a08}, Edges: []uint32{3}})
	tr.Close()
	return dir
}

// TestSeed: a kept corpus seeds an empty campaign corpus of the same
// build, from its workdir or its corpus directory; another build's, a
// program without coverage and a missing directory are refused, naming
// what is wrong; a campaign corpus that holds programs is left alone.
func TestSeed(t *testing.T) {
	const id = "00112233aabbccdd"
	kept := keptCorpus(t)
	want := Counts{PCs: 3, Edges: 3, ForkMMPCs: 2, Corpus: 2, Symbols: true}
	for _, src := range []string{kept, filepath.Join(kept, "corpus", id)} {
		dst := t.TempDir()
		n, err := Seed(dst, id, src)
		if err != nil || n != 2 {
			t.Fatalf("Seed from %s: %d programs, %v; want 2", src, n, err)
		}
		tr, err := Open(dst, id, true, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.Counts(); got != want {
			t.Errorf("seeded from %s: counts %+v, want %+v", src, got, want)
		}
		tr.Close()
		// Seeded once: a second call (a resumed campaign) copies nothing.
		if n, err := Seed(dst, id, src); n != 0 || err != nil {
			t.Errorf("seeding a corpus that holds programs: %d, %v", n, err)
		}
	}

	noJSON := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(kept, "corpus", id, firstFFZ(t, filepath.Join(kept, "corpus", id))))
	os.WriteFile(filepath.Join(noJSON, "p.ffz"), b, 0o644)
	for _, c := range []struct {
		name, src, id string
		build         bool   // errors.Is ErrSeedBuild
		msg           string // in the error
	}{
		{"workdir of another build", kept, "ffeeddccbbaa9988", true, "holds corpora of kernel builds 00112233aabbccdd, not of the campaign's (ffeeddccbbaa9988)"},
		{"corpus dir of another build", filepath.Join(kept, "corpus", id), "ffeeddccbbaa9988", true, "is kernel build 00112233aabbccdd's"},
		{"no coverage file", noJSON, id, false, "program p.ffz has no coverage file"},
		{"missing", filepath.Join(kept, "nope"), id, false, "no such file"},
		{"empty", t.TempDir(), id, false, "neither a corpus directory"},
	} {
		_, err := Seed(t.TempDir(), c.id, c.src)
		if err == nil || errors.Is(err, ErrSeedBuild) != c.build || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want one saying %q (build mismatch: %v)", c.name, err, c.msg, c.build)
		}
	}
}

func firstFFZ(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.ffz"))
	if len(m) == 0 {
		t.Fatalf("no programs in %s", dir)
	}
	return filepath.Base(m[0])
}
