package vm

import (
	"bytes"
	"errors"
	"testing"
)

// decodeAll rebuilds the image a sparse encoding holds.
func decodeAll(t testing.TB, enc []byte) ([]byte, error) {
	var img []byte
	size, err := decodeSparse(enc, func(off int64, data []byte) error {
		if need := int(off) + len(data); need > len(img) {
			img = append(img, make([]byte, need-len(img))...)
		}
		copy(img[off:], data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(img, make([]byte, int(size)-len(img))...), nil
}

// TestSparseRoundTrip: images of zero and non-zero blocks (a partial last
// block, runs across extents) come back byte for byte, and only the
// non-zero blocks are carried.
func TestSparseRoundTrip(t *testing.T) {
	blk := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	cases := map[string][]byte{
		"empty":        {},
		"zeros":        make([]byte, 5*sparseBlock),
		"one-block":    append(make([]byte, 2*sparseBlock), blk(7, sparseBlock)...),
		"partial-tail": append(blk(1, sparseBlock), blk(2, 100)...),
		"mixed":        append(append(append(blk(3, 2*sparseBlock), make([]byte, 3*sparseBlock)...), blk(4, sparseBlock)...), make([]byte, sparseBlock)...),
	}
	for name, img := range cases {
		t.Run(name, func(t *testing.T) {
			for _, ext := range [][][2]int64{{{0, int64(len(img))}}, splitExtents(int64(len(img)))} {
				enc, err := encodeSparse(bytes.NewReader(img), int64(len(img)), ext)
				if err != nil {
					t.Fatal(err)
				}
				got, err := decodeAll(t, enc)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, img) {
					t.Fatalf("extents %v: round trip differs (%d bytes, want %d)", ext, len(got), len(img))
				}
				nonzero := 0
				for off := 0; off < len(img); off += sparseBlock {
					if !bytes.Equal(img[off:min(off+sparseBlock, len(img))], make([]byte, min(sparseBlock, len(img)-off))) {
						nonzero += min(sparseBlock, len(img)-off)
					}
				}
				if payload := len(enc) - len(sparseMagic) - 8; payload < nonzero || payload > nonzero+12*len(img)/sparseBlock+12 {
					t.Errorf("extents %v: %d payload bytes for %d non-zero", ext, payload, nonzero)
				}
			}
		})
	}
}

// splitExtents cuts [0, size) into two-block extents.
func splitExtents(size int64) [][2]int64 {
	var e [][2]int64
	for off := int64(0); off < size; off += 2 * sparseBlock {
		e = append(e, [2]int64{off, min(off+2*sparseBlock, size)})
	}
	return e
}

// TestSparseDecodeErrors: a bad header and runs that overrun the data or
// the image are refused, naming the byte.
func TestSparseDecodeErrors(t *testing.T) {
	good, _ := encodeSparse(bytes.NewReader(bytes.Repeat([]byte{9}, sparseBlock)), 2*sparseBlock, [][2]int64{{0, sparseBlock}})
	for name, b := range map[string][]byte{
		"no-magic":   []byte("XXSPARSE\x00\x00\x00\x00\x00\x00\x00\x00"),
		"short":      []byte("FFSPA"),
		"cut-header": good[:len(sparseMagic)+8+5],
		"cut-data":   good[:len(good)-1],
		"past-image": append(append([]byte{}, good[:len(sparseMagic)]...), append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, good[len(sparseMagic)+8:]...)...),
	} {
		if _, err := decodeAll(t, b); !errors.Is(err, errSparse) {
			t.Errorf("%s: %v, want errSparse", name, err)
		}
	}
	if _, err := decodeAll(t, good); err != nil {
		t.Errorf("good: %v", err)
	}
}

// TestExt4Image makes the guest's image with the host's mkfs.ext4 (skips
// without it): a few hundred KiB carry a 4 GiB file system whose
// superblock has the ext4 magic.
func TestExt4Image(t *testing.T) {
	enc, err := BuildExt4Image(t.TempDir())
	if err != nil {
		t.Skipf("no ext4 image on this host: %v", err)
	}
	if len(enc) > 1<<20 {
		t.Errorf("sparse image of %d bytes: want a few hundred KiB", len(enc))
	}
	var sb []byte
	size, err := decodeSparse(enc, func(off int64, data []byte) error {
		if off <= 1024 && off+int64(len(data)) >= 2048 {
			sb = data[1024-off : 2048-off]
		}
		return nil
	})
	if err != nil || size != guestExt4Bytes {
		t.Fatalf("decode: size %d, %v", size, err)
	}
	if sb == nil || sb[0x38] != 0x53 || sb[0x39] != 0xef {
		t.Fatalf("no ext4 superblock magic at byte 1080")
	}
	t.Logf("sparse image: %d bytes for %d GiB", len(enc), size>>30)
	again, err := BuildExt4Image(t.TempDir())
	if err != nil || !bytes.Equal(again, enc) {
		t.Errorf("a second image differs (%v): the initramfs, and the saved VM states keyed by it, would change on every build", err)
	}
}

func FuzzDecodeSparse(f *testing.F) {
	good, _ := encodeSparse(bytes.NewReader(bytes.Repeat([]byte{5}, sparseBlock+7)), 3*sparseBlock, [][2]int64{{0, sparseBlock + 7}})
	f.Add(good)
	f.Add([]byte("FFSPARSE\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var total int64
		size, err := decodeSparse(b, func(off int64, data []byte) error {
			if off < 0 || off+int64(len(data)) > 1<<40 {
				t.Fatalf("run at %d (%d bytes) escapes the image", off, len(data))
			}
			total += int64(len(data))
			return nil
		})
		if err == nil && total > int64(len(b)) {
			t.Fatalf("decoded %d bytes from %d (size %d)", total, len(b), size)
		}
	})
}
