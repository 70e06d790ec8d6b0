package kernel

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// FileSHA256 hashes a regular file and refuses a FIFO at once (it used
// to hash it forever, or block on open without a writer).
func TestFileSHA256(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "img")
	os.WriteFile(p, []byte("abc"), 0o644)
	if got, err := FileSHA256(p); err != nil || got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("FileSHA256(abc) = %s, %v", got, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if _, err := FileSHA256(fifo); err == nil {
		t.Error("a FIFO was hashed")
	}
	if _, err := FileSHA256(dir); err == nil {
		t.Error("a directory was hashed")
	}
}
