package vm

// The guest's ext4 file system, for programs' ext4-* regions: the host
// makes an empty ext4 image with mkfs.ext4 and ships its non-zero blocks
// in the initramfs (a sparse image, below); at boot the guest writes them
// into a sparse file on a tmpfs of its own, attaches a loop device and
// mounts it on executor.GuestExt4Dir. The file system lives in guest RAM,
// so a VM state saved after the hello (snapshot.go) holds it whole and
// consistent, and discard (mount option) gives freed blocks back.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"golang.org/x/sys/unix"
)

const (
	// guestExt4Bytes is the file system's size: more than every region
	// of a program can hold (prog.MaxRegions * prog.SpanBytes), so no
	// write fault ever meets ENOSPC; only written blocks take memory.
	guestExt4Bytes = 4 << 30
	// guestExt4Image is the sparse image's path in the initramfs.
	guestExt4Image = "/etc/forkfuzz/ext4.sparse"
	// guestExt4Backing is the tmpfs the image's file lives on; its size
	// limit is the file system's, so guest RAM is the only bound.
	guestExt4Backing = "/run/forkfuzz/ext4-backing"
	sparseMagic      = "FFSPARSE"
	sparseBlock      = 4096
)

// mkfsArgs makes a small-metadata ext4: few inodes (a program has at most
// 16 files), a 4 MiB journal, no blocks reserved for growing it (2 MiB of
// them otherwise), inode tables and journal not zeroed (a new file
// system's are zero already: the sparse file's holes). A fixed UUID, hash
// seed and time (mkfsEnv) make the image the same on every build, so the
// initramfs, and the saved VM states keyed by it, stay the same.
var mkfsArgs = []string{"-q", "-F", "-t", "ext4", "-b", "4096", "-N", "256", "-J", "size=4", "-O", "^resize_inode",
	"-U", "666f726b-6675-7a7a-0000-000000000001",
	"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,hash_seed=666f726b-6675-7a7a-0000-000000000002", "-L", "forkfuzz"}

// mkfsEnv fixes the time mkfs.ext4 writes into the image.
const mkfsEnv = "E2FSPROGS_FAKE_TIME=1733356800"

// BuildExt4Image runs mkfs.ext4 on a sparse file in dir and returns the
// guest's ext4 image in the sparse format (the magic "FFSPARSE", the
// image's size as a little-endian u64, then runs of offset u64, length
// u32 and the bytes), for VMs booted without the agent (the C
// reproducers' VMs mount it the same way). The error says why there is
// none (no mkfs.ext4 on the host).
func BuildExt4Image(dir string) ([]byte, error) {
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
			if _, e := os.Stat(p); e == nil {
				mkfs, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no mkfs.ext4 on the host (Debian: e2fsprogs): %w", err)
	}
	img := filepath.Join(dir, "ext4.img")
	defer os.Remove(img)
	f, err := os.Create(img)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(guestExt4Bytes)
	f.Close()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(mkfs, append(mkfsArgs, img)...)
	cmd.Env = append(os.Environ(), mkfsEnv)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", mkfs, err, strings.TrimSpace(string(out)))
	}
	f, err = os.Open(img)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return encodeSparse(f, guestExt4Bytes, dataExtents(f, guestExt4Bytes))
}

// dataExtents lists the parts of f that may hold data (SEEK_DATA and
// SEEK_HOLE; the whole file where the file system cannot say).
func dataExtents(f *os.File, size int64) [][2]int64 {
	var ext [][2]int64
	for pos := int64(0); pos < size; {
		off, err := unix.Seek(int(f.Fd()), pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return [][2]int64{{0, size}}
		}
		end, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
		if err != nil {
			return [][2]int64{{0, size}}
		}
		ext = append(ext, [2]int64{off, min(end, size)})
		pos = end
	}
	return ext
}

// encodeSparse keeps the non-zero blocks of an image of size bytes read
// from r within the extents: the magic, the size (u64), then runs of
// (offset u64, length u32, bytes), little endian.
func encodeSparse(r io.ReaderAt, size int64, extents [][2]int64) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(sparseMagic)
	binary.Write(&out, binary.LittleEndian, uint64(size))
	zero := make([]byte, sparseBlock)
	var run []byte
	runAt := int64(0)
	flush := func() {
		if len(run) > 0 {
			binary.Write(&out, binary.LittleEndian, uint64(runAt))
			binary.Write(&out, binary.LittleEndian, uint32(len(run)))
			out.Write(run)
			run = run[:0]
		}
	}
	buf := make([]byte, sparseBlock)
	for _, e := range extents {
		flush()
		for off := e[0]; off < e[1]; off += sparseBlock {
			b := buf[:min(sparseBlock, e[1]-off)]
			if _, err := r.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if bytes.Equal(b, zero[:len(b)]) {
				flush()
				continue
			}
			if len(run) >= 1<<30 {
				flush()
			}
			if len(run) == 0 {
				runAt = off
			}
			run = append(run, b...)
		}
	}
	flush()
	return out.Bytes(), nil
}

// errSparse marks a malformed sparse image.
var errSparse = errors.New("malformed sparse image")

// decodeSparse calls put with each run of a sparse image and returns the
// image's size. It checks every field against the data's length, never
// allocating from a length it read.
func decodeSparse(b []byte, put func(off int64, data []byte) error) (int64, error) {
	if len(b) < len(sparseMagic)+8 || string(b[:len(sparseMagic)]) != sparseMagic {
		return 0, fmt.Errorf("%w: no %q header", errSparse, sparseMagic)
	}
	pos := len(sparseMagic)
	size := binary.LittleEndian.Uint64(b[pos:])
	pos += 8
	if size > 1<<40 {
		return 0, fmt.Errorf("%w: size %d over 1 TiB", errSparse, size)
	}
	for pos < len(b) {
		if len(b)-pos < 12 {
			return 0, fmt.Errorf("%w: run header at byte %d cut short", errSparse, pos)
		}
		off := binary.LittleEndian.Uint64(b[pos:])
		n := uint64(binary.LittleEndian.Uint32(b[pos+8:]))
		pos += 12
		if n > uint64(len(b)-pos) || off > size || n > size-off {
			return 0, fmt.Errorf("%w: run at byte %d (offset %d, %d bytes) runs past the data or the image", errSparse, pos-12, off, n)
		}
		if err := put(int64(off), b[pos:pos+int(n)]); err != nil {
			return 0, err
		}
		pos += int(n)
	}
	return int64(size), nil
}

// setupExt4 mounts the initramfs's ext4 image on executor.GuestExt4Dir
// (guest, PID 1). It returns what to say on the console.
func setupExt4() string {
	b, err := os.ReadFile(guestExt4Image)
	if errors.Is(err, os.ErrNotExist) {
		return "init: no ext4 (the host made no image: ext4 regions will be refused)"
	}
	if err == nil {
		err = mountExt4(b)
	}
	os.Remove(guestExt4Image) // its memory is the initramfs's
	if err != nil {
		return fmt.Sprintf("init: no ext4 (ext4 regions will be refused): %v", err)
	}
	return fmt.Sprintf("init: ext4 on %s (%d GiB, in memory)", executor.GuestExt4Dir, guestExt4Bytes>>30)
}

func mountExt4(b []byte) error {
	for _, d := range []string{guestExt4Backing, executor.GuestExt4Dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", guestExt4Backing, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", guestExt4Bytes+(64<<20))); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", guestExt4Backing, err)
	}
	f, err := os.OpenFile(filepath.Join(guestExt4Backing, "ext4.img"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := decodeSparse(b, func(off int64, data []byte) error {
		_, err := f.WriteAt(data, off)
		return err
	})
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	dev, err := attachLoop(f)
	if err != nil {
		return err
	}
	if err := unix.Mount(dev, executor.GuestExt4Dir, "ext4", 0, "discard,noinit_itable"); err != nil {
		return fmt.Errorf("mount ext4 %s on %s: %w", dev, executor.GuestExt4Dir, err)
	}
	return nil
}
