package executor

import (
	"fmt"
	"os"
	"testing"
	"unsafe"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestHeapMappingsExcludeArenas(t *testing.T) {
	top, low := prog.ArenaTop.Base(), prog.ArenaLow.Base()
	maps := fmt.Sprintf(`00400000-00800000 r-xp 00000000 08:01 1234 /usr/bin/executor
c000000000-c004000000 rw-p 00000000 00:00 0 
7f0000001000-7f0000500000 rw-p 00000000 00:00 0
7f0000600000-7f0000700000 rw-p 00000000 00:00 0
7f0002000000-7f0002400000 rw-p 00000000 00:00 0 [anon: Go: heap]
7f0000800000-7f0000c00000 r--p 00000000 00:00 0
7f0001000000-7f0001400000 rw-s 00000000 00:05 77 /sys/kernel/debug/kcov
7ffc00000000-7ffc00400000 rw-p 00000000 00:00 0 [stack]
%x-%x rw-p 00000000 00:00 0
%x-%x rw-p 00000000 00:00 0
%x-%x rw-p 00000000 00:00 0
`, top, top+4*hugeSize, low+hugeSize, low+8*hugeSize, low-4*hugeSize, low+2*hugeSize)
	got := heapMappings([]byte(maps))
	want := []heapMapping{
		{0xc000000000, 0xc004000000},
		{0x7f0000200000, 0x7f0000400000}, // clipped to whole huge pages
		{0x7f0002000000, 0x7f0002400000}, // named by the Go runtime
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("heapMappings = %x, want %x", got, want)
	}
}

func TestHeapMappingsFindTheHeap(t *testing.T) {
	buf := make([]byte, 16<<20)
	buf[0] = 1
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&buf[8<<20])))
	ms := heapMappings(maps)
	found := false
	for _, m := range ms {
		if inArena(m.start, m.end) || m.start%hugeSize != 0 || m.end%hugeSize != 0 {
			t.Errorf("mapping %x-%x: in an arena or not aligned", m.start, m.end)
		}
		found = found || (addr >= m.start && addr < m.end)
	}
	if !found {
		t.Errorf("the heap address %#x is in none of %x", addr, ms)
	}
}
