package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeImage is the smallest input IsImage takes for a bzImage.
func fakeImage() []byte {
	b := make([]byte, 0x300)
	copy(b[0x202:], "HdrS")
	return b
}

// kernel check on what a user may pass: a config, an image with its
// config beside it, and inputs that must be refused at once (no endless
// read of /dev/zero, no wait on a FIFO).
func TestFindConfigInputs(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string) string
		src   string // where the config came from (suffix), or
		err   string // the error
	}{
		{name: ".config", setup: func(t *testing.T, dir string) string {
			return writeFile(t, filepath.Join(dir, ".config"), "CONFIG_MMU=y\n")
		}, src: ".config"},
		{name: "image with config beside", setup: func(t *testing.T, dir string) string {
			writeFile(t, filepath.Join(dir, "config-6.1"), "CONFIG_MMU=y\n")
			return writeFile(t, filepath.Join(dir, "bzImage-6.1"), string(fakeImage()))
		}, src: "config-6.1"},
		{name: "image whose config beside is a FIFO", setup: func(t *testing.T, dir string) string {
			if err := syscall.Mkfifo(filepath.Join(dir, "config-6.1"), 0o644); err != nil {
				t.Fatal(err)
			}
			return writeFile(t, filepath.Join(dir, "bzImage-6.1"), string(fakeImage()))
		}, err: "config-6.1 is a FIFO, want a regular file"},
		{name: "image without config", setup: func(t *testing.T, dir string) string {
			return writeFile(t, filepath.Join(dir, "bzImage-6.1"), string(fakeImage()))
		}, err: "no embedded configuration"},
		{name: "FIFO", setup: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "fifo")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, err: "fifo is a FIFO, want a regular file"},
		{name: "/dev/zero", setup: func(t *testing.T, dir string) string { return "/dev/zero" },
			err: "/dev/zero is a character device, want a regular file"},
		{name: "directory", setup: func(t *testing.T, dir string) string { return dir },
			err: "is a directory, want a regular file"},
		{name: "image over the limit (sparse)", setup: func(t *testing.T, dir string) string {
			p := writeFile(t, filepath.Join(dir, "huge"), string(fakeImage()))
			if err := os.Truncate(p, MaxImageFile+1<<20); err != nil {
				t.Fatal(err)
			}
			return p
		}, err: "huge is 513 MiB, larger than the 512 MiB limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.setup(t, t.TempDir())
			done := make(chan struct{})
			var src string
			var err error
			go func() {
				defer close(done)
				_, src, err = FindConfig(path)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("FindConfig(%s) blocked", path)
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || !strings.HasSuffix(src, c.src) {
				t.Fatalf("source %q, %v; want %q", src, err, c.src)
			}
		})
	}
}

func TestReadConfigBounded(t *testing.T) {
	p := writeFile(t, filepath.Join(t.TempDir(), "big.config"), "CONFIG_MMU=y\n")
	if err := os.Truncate(p, MaxConfigFile+1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfig(p); err == nil || !strings.Contains(err.Error(), "larger than the 16 MiB limit") {
		t.Fatalf("err %v", err)
	}
	if _, err := ReadConfig("/dev/zero"); err == nil || !strings.Contains(err.Error(), "character device") {
		t.Fatalf("err %v", err)
	}
}

func writeFile(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
