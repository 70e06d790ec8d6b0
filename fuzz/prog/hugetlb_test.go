package prog

import (
	"errors"
	"strings"
	"testing"
)

// TestHugetlbKinds: every hugetlb kind parses and formats back unchanged,
// has the sharing and backing of its Base kind, and a size that is not a
// whole number of 2 MiB pages is refused by the parser (naming the line,
// the pages field's column and the rule) and by Validate.
func TestHugetlbKinds(t *testing.T) {
	want := map[RegionKind]RegionKind{HugetlbPrivate: AnonPrivate, HugetlbShared: AnonShared,
		MemfdHugetlbPrivate: MemfdPrivate, MemfdHugetlbShared: MemfdShared}
	for k := RegionKind(0); int(k) < NumRegionKinds; k++ {
		if !k.Hugetlb() {
			if k.FS() == NoFS && k.Base() != k {
				t.Errorf("%v: Base %v, want itself", k, k.Base())
			}
			continue
		}
		b := k.Base()
		if b != want[k] || b.Shared() != k.Shared() || b.Memfd() != k.Memfd() || b.Hugetlb() {
			t.Errorf("%v: Base %v, want %v", k, b, want[k])
		}
		text := "forkfuzz v1\nregion r0 " + k.String() + " pages=1024 thp=default\nstore r0 off=0x200000 count=1 stride=0x8\n"
		p, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if p.Regions[0].Kind != k || p.Regions[0].Pages != 2*HugetlbPages {
			t.Errorf("%v: parsed %+v", k, p.Regions[0])
		}
		if got := string(p.Format()); got != text {
			t.Errorf("%v: Format:\n%s\nwant\n%s", k, got, text)
		}
		for _, pages := range []int{1, 511, 513, 1000} {
			_, err := Parse([]byte("forkfuzz v1\nregion r0 " + k.String() + " pages=" + itoa(pages) + "\n"))
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line != 2 || se.Col != 12+len(k.String())+6 ||
				!strings.Contains(se.Msg, "not a multiple of 512 (one 2 MiB huge page)") {
				t.Errorf("%v pages=%d: got %v, want 2:%d: ...not a multiple of 512", k, pages, err, 12+len(k.String())+6)
			}
			p := &Program{Regions: []Region{{Kind: k, Pages: pages}}}
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not a multiple of 512") {
				t.Errorf("%v pages=%d: Validate: %v", k, pages, err)
			}
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
