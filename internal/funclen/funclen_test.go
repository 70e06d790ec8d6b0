package funclen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := func(n int) string { return strings.Repeat("\t_ = 0\n", n-2) }
	write("a.go", "package a\n\n// Doc lines do not count.\nfunc short() {\n"+body(3)+"}\n\n"+
		"type T[E any] struct{}\n\nfunc (t *T[E]) long() {\n"+body(6)+"}\n\nfunc mid() {\n"+body(5)+"}\n")
	write("a_test.go", "package a\n\nfunc testOnly() {\n"+body(20)+"}\n")
	write("testdata/b.go", "package b\n\nfunc data() {\n"+body(20)+"}\n")
	write("sub/c.go", "package c\n\nfunc other() {\n"+body(6)+"}\n")

	got, err := Measure(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Func{
		{File: "a.go", Line: 10, Name: "T.long", Lines: 6},
		{File: "sub/c.go", Line: 3, Name: "other", Lines: 6},
		{File: "a.go", Line: 17, Name: "mid", Lines: 5},
	}
	if len(got) != len(want) {
		t.Fatalf("Measure = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Measure[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
