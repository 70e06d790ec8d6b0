package cover

import (
	"os"
	"path/filepath"
	"testing"
)

// The symbols one campaign read for an image serve a later campaign on
// the same image in another workdir without asking the target; a kernel
// named by its release only is never cached.
func TestSymbolsCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("FORKFUZZ_CACHE", cache)
	const image = "0123456789abcdef"
	for _, tc := range []struct {
		id     string
		cached bool
	}{
		{image, true},
		{"release-6.1.0-28-cloud-amd64", false},
		{"0123456789ABCDEF", false}, // not KernelID's spelling
		{"0123456789abcde", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			w1, w2 := t.TempDir(), t.TempDir()
			if HaveSymbols(w1, tc.id) {
				t.Fatalf("symbols at hand before any campaign read them")
			}
			tr, err := Open(w1, tc.id, false, "")
			if err != nil {
				t.Fatal(err)
			}
			if !tr.NeedSymbols() || tr.SymbolsFrom != "" {
				t.Fatalf("a fresh tracker has symbols (from %q)", tr.SymbolsFrom)
			}
			if err := tr.SetSymbols(kallsyms); err != nil {
				t.Fatal(err)
			}
			if !HaveSymbols(w1, tc.id) {
				t.Errorf("the workdir's own symbols are not at hand")
			}
			if got := HaveSymbols(w2, tc.id); got != tc.cached {
				t.Fatalf("another workdir has the symbols at hand: %v, want %v", got, tc.cached)
			}
			tr2, err := Open(w2, tc.id, false, "")
			if err != nil {
				t.Fatal(err)
			}
			if tr2.NeedSymbols() == tc.cached {
				t.Fatalf("second workdir needs symbols: %v, want %v", tr2.NeedSymbols(), !tc.cached)
			}
			if !tc.cached {
				return
			}
			want := filepath.Join(cache, "kallsyms", tc.id)
			if tr2.SymbolsFrom != want {
				t.Errorf("SymbolsFrom %q, want %q", tr2.SymbolsFrom, want)
			}
			// The corpus directory gets its own copy (forkfuzz cover reads it).
			if b, err := os.ReadFile(filepath.Join(tr2.Dir, "kallsyms")); err != nil || string(b) != kallsyms {
				t.Errorf("the second corpus directory's kallsyms: %v", err)
			}
			f1, ok1 := tr.Symbols().Func(0xffffffff81100010)
			f2, ok2 := tr2.Symbols().Func(0xffffffff81100010)
			if !ok1 || f1 != f2 || ok1 != ok2 {
				t.Errorf("cached symbols name a PC %q, the read ones %q", f2, f1)
			}
		})
	}
}

// A cache file that does not parse is not used: the target is asked, and
// its answer replaces the file.
func TestSymbolsCacheBroken(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("FORKFUZZ_CACHE", cache)
	const id = "fedcba9876543210"
	p := filepath.Join(cache, "kallsyms", id)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("zz T x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(t.TempDir(), id, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.NeedSymbols() || tr.SymbolsFrom != "" {
		t.Fatalf("a broken cache was used (from %q)", tr.SymbolsFrom)
	}
	if err := tr.SetSymbols(kallsyms); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != kallsyms {
		t.Errorf("the broken cache file was not replaced: %q", b)
	}
}
