package obs

import "testing"

// BenchmarkDecodeViews decodes a report of four views of 16K pages with
// eight non-zero words each (a view of a 64 MiB region written all over).
func BenchmarkDecodeViews(b *testing.B) {
	const pages, words = 1 << 14, 8
	e := NewEncoder()
	for v := 0; v < 4; v++ {
		e.Add(RecViewBegin, uint64(v), 0)
		e.Add(RecVMA, 1<<30, 1<<30+pages<<12, 3, 0, 0)
		e.Add(RecRun, 0, 0, pages, uint64(Readable))
		for p := uint64(0); p < pages; p++ {
			e.Add(RecPage, 0, p, p*0x9e3779b97f4a7c15, words)
			for w := uint64(0); w < words; w++ {
				e.Add(RecWord, 0, p<<12+w*8, p^w)
			}
		}
		e.Add(RecViewEnd, 0)
	}
	b.SetBytes(int64(len(e.Buf)))
	b.ReportAllocs()
	for b.Loop() {
		o, err := Decode(e.Buf, 1, 1)
		if err != nil || len(o.Views) != 4 || len(o.Views[3].Words) != pages*words {
			b.Fatalf("%v: %d views", err, len(o.Views))
		}
	}
}
