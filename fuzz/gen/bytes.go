package gen

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// FromBytes decodes arbitrary bytes into a valid program: the bytes drive
// the generator's random choices directly (8 bytes per draw, so a small
// change to the input changes a few choices), and once they run out a PCG
// seeded from a hash of the input takes over. The same bytes always give
// the same program. It is meant for coverage-guided fuzzers (testing.F,
// go-fuzz), which then explore programs by mutating bytes.
func FromBytes(data []byte) *prog.Program {
	return Generate(rand.New(newByteSource(data)), DefaultWeights())
}

// byteSource is a rand.Source that replays input bytes, then continues
// with a seeded PCG.
type byteSource struct {
	data []byte
	pcg  *rand.PCG
}

func newByteSource(data []byte) *byteSource {
	h := sha256.Sum256(data)
	return &byteSource{
		data: data,
		pcg:  rand.NewPCG(binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16])),
	}
}

// Uint64 returns the next 8 input bytes as a big-endian number (so the
// first byte of each group weighs most in every choice; zero-padded at the
// end of the input), then PCG output.
func (s *byteSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.pcg.Uint64()
	}
	var b [8]byte
	n := copy(b[:], s.data)
	s.data = s.data[n:]
	return binary.BigEndian.Uint64(b[:])
}
