package ksyms

import (
	"strings"
	"testing"
)

const text = `ffffffff81000000 T _stext
ffffffff81001000 t do_one
ffffffff81002000 D some_data
ffffffff81003000 T copy_page_range
ffffffff81004000 W weak_fn
0000000000000000 T hidden
`

func TestParse(t *testing.T) {
	s, err := Parse("kallsyms", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pc   uint64
		want string
		ok   bool
	}{
		{0xffffffff80ffffff, "", false},
		{0xffffffff81000000, "_stext", true},
		{0xffffffff81002500, "do_one", true}, // data symbols are not functions
		{0xffffffff81003010, "copy_page_range", true},
		{0xffffffff89000000, "weak_fn", true},
	} {
		got, ok := s.Func(c.pc)
		if got != c.want || ok != c.ok {
			t.Errorf("Func(%#x) = %q, %v; want %q, %v", c.pc, got, ok, c.want, c.ok)
		}
	}
	if lo, hi, ok := s.Range("copy_page_range"); !ok || lo != 0xffffffff81003000 || hi != 0xffffffff81004000 {
		t.Errorf("Range = %#x, %#x, %v", lo, hi, ok)
	}
	if _, _, ok := s.Range("nope"); ok {
		t.Error("Range found a missing function")
	}
	pcs := []uint64{0xffffffff81003001, 0xffffffff81003002, 0xffffffff81003003, 0xffffffff81001001}
	if got := s.HotSpot(pcs, 2); got != "copy_page_range 75%, do_one 25%" {
		t.Errorf("HotSpot = %q", got)
	}
	var none *Symbols
	if got := none.HotSpot(pcs, 3); got != "" {
		t.Errorf("nil HotSpot = %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "k: no text symbols"},
		{"ffff D data\n", "k: no text symbols"},
		{"zzzz T f\n", `k:1: address "zzzz": not hex`},
	} {
		if _, err := Parse("k", strings.NewReader(c.text)); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}

// FuzzParse: the parser never panics, and what it accepts answers Func,
// Range and HotSpot without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(text))
	f.Add([]byte("1 T a\n1 T b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse("f", strings.NewReader(string(b)))
		if err != nil {
			return
		}
		s.Func(0)
		s.Func(^uint64(0))
		s.Range("a")
		s.HotSpot([]uint64{0, 1, ^uint64(0)}, 3)
	})
}
