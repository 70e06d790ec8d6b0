package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"golang.org/x/sys/unix"
)

// The file kinds' regions (prog's tmpfs-* and ext4-*) are backed by a
// regular file the executor creates on a directory of that file system,
// unlinks at once and holds open for the program's life, like a memfd.

// GuestExt4Dir is where the VM agent mounts the guest's ext4 file system
// (an image on a loop device, agents/vm); the executor looks there first.
const GuestExt4Dir = "/run/forkfuzz/ext4"

// ErrNoFileSystem marks a run refused because a file kind's region has no
// directory on its file system: nothing ran, nothing is judged.
var ErrNoFileSystem = errors.New("no writable directory on the region's file system (FORKFUZZ_TMPFS_DIR, FORKFUZZ_EXT4_DIR); file region skipped, program not run")

// FSDirEnv is the environment variable naming a directory on f.
func FSDirEnv(f prog.FS) string { return "FORKFUZZ_" + strings.ToUpper(f.String()) + "_DIR" }

// fsCandidates lists where FileDir looks for a directory on f, in order.
func fsCandidates(f prog.FS) []string {
	var c []string
	if d := os.Getenv(FSDirEnv(f)); d != "" {
		c = append(c, d)
	}
	if f == prog.Ext4 {
		c = append(c, GuestExt4Dir)
	}
	return append(c, os.TempDir(), "/dev/shm", "/var/tmp", "/tmp")
}

// FileDir returns a writable directory on file system f: the first of
// $FORKFUZZ_<FS>_DIR, the guest's ext4 mount (ext4 only), $TMPDIR,
// /dev/shm, /var/tmp and /tmp whose statfs type is f's. The error wraps
// ErrNoFileSystem.
func FileDir(f prog.FS) (string, error) {
	if f.Info().Magic == 0 {
		return "", fmt.Errorf("executor: %d is no file system of a file kind: %w", f, ErrNoFileSystem)
	}
	var tried []string
	for _, d := range fsCandidates(f) {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err != nil || st.Type != f.Info().Magic {
			tried = append(tried, d)
			continue
		}
		if unix.Access(d, unix.W_OK) != nil {
			tried = append(tried, d+" (not writable)")
			continue
		}
		return d, nil
	}
	return "", fmt.Errorf("executor: no %s among %s: %w", f, strings.Join(tried, ", "), ErrNoFileSystem)
}

// openRegionFile creates, unlinks and sizes the file behind region i of
// file kind k and returns its descriptor.
func openRegionFile(k prog.RegionKind, i int) (int, error) {
	dir, err := FileDir(k.FS())
	if err != nil {
		return -1, fmt.Errorf("executor: %s region r%d: %w", k, i, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("forkfuzz-%d-r%d", os.Getpid(), i))
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("executor: file of r%d: %w", i, err)
	}
	if err := unix.Unlink(path); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("executor: unlink file of r%d: %w", i, err)
	}
	return fd, nil
}

// AvailableFileSystems names the file systems of the file kinds this
// process has a directory on (FileDir).
func AvailableFileSystems() []string {
	var fs []string
	for _, f := range prog.FileSystems() {
		if _, err := FileDir(f); err == nil {
			fs = append(fs, f.String())
		}
	}
	return fs
}
