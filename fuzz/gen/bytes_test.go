package gen

import (
	"bytes"
	"testing"
)

// FuzzFromBytes checks that every byte string decodes to a valid program
// that round-trips, the same one every time.
func FuzzFromBytes(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("forkfuzz"))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Add(bytes.Repeat([]byte{0x00}, 300))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := FromBytes(data)
		checkProgram(t, p, "FromBytes")
		if !bytes.Equal(FromBytes(data).Format(), p.Format()) {
			t.Fatal("FromBytes is not deterministic")
		}
	})
}

func TestFromBytesVaries(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		seen[string(FromBytes([]byte{byte(i), byte(i * 7), 3}).Format())] = true
	}
	if len(seen) < 90 {
		t.Fatalf("only %d distinct programs from 100 inputs", len(seen))
	}
}
