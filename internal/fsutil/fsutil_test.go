package fsutil

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every kind of path a user may pass where a file is expected, with the
// error it must get; none may block or read without bound.
func TestReadFileLimited(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 4097), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(small, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		name, path string
		max        int64
		want       string // "" : content "hello\n" (or empty for empty)
		notRegular bool
		tooLarge   bool
		notExist   bool
	}{
		{name: "regular", path: small, max: 1 << 20},
		{name: "exactly the limit", path: small, max: 6},
		{name: "symlink to a regular file", path: link, max: 1 << 20},
		{name: "empty", path: empty, max: 1},
		{name: "over the limit", path: big, max: 4096, want: "big is 4097 bytes, larger than the 4096 bytes limit", tooLarge: true},
		{name: "one byte over", path: small, max: 5, want: "small is 6 bytes, larger than the 5 bytes limit", tooLarge: true},
		{name: "FIFO", path: fifo, max: 1 << 20, want: "fifo is a FIFO, want a regular file", notRegular: true},
		{name: "/dev/zero", path: "/dev/zero", max: 1 << 20, want: "/dev/zero is a character device, want a regular file", notRegular: true},
		{name: "directory", path: dir, max: 1 << 20, want: " is a directory, want a regular file", notRegular: true},
		{name: "socket", path: sock, max: 1 << 20, want: "sock is a socket, want a regular file", notRegular: true},
		{name: "missing", path: filepath.Join(dir, "nope"), max: 1 << 20, want: "no such file", notExist: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() {
				defer close(done)
				b, err = ReadFileLimited(c.path, c.max)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("ReadFileLimited(%s) blocked", c.path)
			}
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if w := map[bool]string{true: "", false: "hello\n"}[c.path == empty]; string(b) != w {
					t.Fatalf("read %q, want %q", b, w)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one saying %q", err, c.want)
			}
			var nr *NotRegularError
			var tl *TooLargeError
			if errors.As(err, &nr) != c.notRegular || errors.As(err, &tl) != c.tooLarge || errors.Is(err, fs.ErrNotExist) != c.notExist {
				t.Fatalf("err %T %v: wrong type", err, err)
			}
			if cerr := CheckRegular(c.path, c.max); (cerr == nil) || cerr.Error() != err.Error() {
				t.Errorf("CheckRegular: %v, ReadFileLimited: %v", cerr, err)
			}
		})
	}
}

// A FIFO with a writer that never stops is refused too (the stat sees the
// FIFO before any open).
func TestReadFileLimitedFIFOWithWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // O_RDWR: does not wait for a reader
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write(make([]byte, 4096))
	if _, err := ReadFileLimited(fifo, 1<<20); err == nil || !strings.Contains(err.Error(), "is a FIFO") {
		t.Fatalf("err %v", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB",
		1 << 20: "1 MiB", 512 << 20: "512 MiB", 64 << 30: "64 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
