package executor

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// scanPage copies exactly the non-zero 64-byte blocks of a page and says
// which: a view records every non-zero word of a readable page from it.
func TestScanPage(t *testing.T) {
	page := mappedPage(t)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := map[string]func(){
		"zero":        func() {},
		"first word":  func() { page[0] = 1 },
		"last word":   func() { page[511] = ^uint64(0) },
		"every block": func() { fillBlocks(page, 0, 64) },
		"top bit":     func() { page[8*63+3] = 1 << 63 },
		"random":      func() { randomWords(page, rng, 20) },
		"dense":       func() { randomWords(page, rng, 2000) },
	}
	for name, fill := range cases {
		*page = [512]uint64{}
		fill()
		var dst [512]uint64
		for i := range dst {
			dst[i] = 0xdead // blocks not copied keep what was there
		}
		mask := scanPage(&dst, uintptr(unsafe.Pointer(page)))
		for b := 0; b < 64; b++ {
			nonzero := false
			for w := 8 * b; w < 8*b+8; w++ {
				nonzero = nonzero || page[w] != 0
			}
			if got := mask>>b&1 == 1; got != nonzero {
				t.Errorf("%s: block %d: mask bit %v, block non-zero %v", name, b, got, nonzero)
			}
			for w := 8 * b; w < 8*b+8; w++ {
				want := uint64(0xdead)
				if nonzero {
					want = page[w]
				}
				if dst[w] != want {
					t.Errorf("%s: word %d: copied %#x, want %#x", name, w, dst[w], want)
				}
			}
		}
	}
}

// mappedPage is a page of its own mapping, unmapped when tb ends.
func mappedPage(tb testing.TB) *[512]uint64 {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	return (*[512]uint64)(unsafe.Pointer(&mem[0]))
}

func fillBlocks(p *[512]uint64, from, to int) {
	for b := from; b < to; b++ {
		p[8*b+b%8] = uint64(b) + 1
	}
}

func randomWords(p *[512]uint64, rng *rand.Rand, n int) {
	for range n {
		p[rng.IntN(512)] = rng.Uint64() | 1
	}
}

func BenchmarkScanPage(b *testing.B) {
	page := mappedPage(b)
	randomWords(page, rand.New(rand.NewPCG(1, 2)), 8)
	var dst [512]uint64
	b.Run("copyPage+scan", func(b *testing.B) {
		for b.Loop() {
			copyPage(&dst, uintptr(unsafe.Pointer(page)))
			n := 0
			for k := 0; k < 512; k += 8 {
				if dst[k]|dst[k+1]|dst[k+2]|dst[k+3]|dst[k+4]|dst[k+5]|dst[k+6]|dst[k+7] != 0 {
					n++
				}
			}
			_ = n
		}
	})
	b.Run("scanPage", func(b *testing.B) {
		for b.Loop() {
			scanPage(&dst, uintptr(unsafe.Pointer(page)))
		}
	})
}
