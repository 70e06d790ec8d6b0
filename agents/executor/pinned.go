package executor

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// pinRes holds what the pinned operations (prog/pinned.go) need: pipes,
// a scratch file that holds the data odirect and uringread bring in, an
// io_uring and a userfaultfd. Children inherit the descriptors; only the
// main process uses the ring and the userfaultfd (validation says so).
type pinRes struct {
	pipes [prog.MaxPipes][2]int

	scratchTried   bool
	bfd, dfd       int     // scratch file: buffered and O_DIRECT descriptors, -1 if none
	bfdErr, dfdErr uintptr // why not

	ring     uring
	ringErr  uintptr
	uffd     int
	uffdCode uint64 // obs.Skip* when uffd < 0
	uffdErr  uintptr

	path [32]byte  // "/proc/PID/mem"
	iov  [4]uint64 // two iovecs
}

// scratchDir is where the scratch file lives: FORKFUZZ_SCRATCH, else the
// temporary directory. O_DIRECT needs a filesystem that supports it (tmpfs
// before Linux 6.6 does not; then odirect is skipped with the reason).
func scratchDir() string {
	if d := os.Getenv("FORKFUZZ_SCRATCH"); d != "" {
		return d
	}
	return os.TempDir()
}

// openScratch opens the scratch file once per executor. Main process only.
func (r *pinRes) openScratch() {
	if r.scratchTried {
		return
	}
	r.scratchTried = true
	r.bfd, r.dfd = -1, -1
	f, err := os.CreateTemp(scratchDir(), "forkfuzz-scratch-*")
	if err != nil {
		r.bfdErr, r.dfdErr = uintptr(unix.EIO), uintptr(unix.EIO)
		if e, ok := errnoOf(err); ok {
			r.bfdErr, r.dfdErr = e, e
		}
		return
	}
	name := filepath.Clean(f.Name())
	f.Close()
	defer os.Remove(name)
	if fd, err := unix.Open(name, unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		r.bfd = fd
	} else {
		r.bfdErr, _ = errnoOf(err)
	}
	if fd, err := unix.Open(name, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0); err == nil {
		r.dfd = fd
	} else {
		r.dfdErr, _ = errnoOf(err)
	}
}

func errnoOf(err error) (uintptr, bool) {
	for err != nil {
		if e, ok := err.(unix.Errno); ok {
			return uintptr(e), true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	return uintptr(unix.EIO), false
}

// setupPinned creates the per-program resources the program uses. Main
// process only.
func (m *machine) setupPinned() {
	r := &m.pin
	var pipes [prog.MaxPipes]bool
	var ring, uffd, scratch bool
	for _, op := range m.p.Ops {
		switch op.Kind {
		case prog.OpVmsplice, prog.OpReadPipe:
			pipes[op.Pipe] = true
		case prog.OpUringReg:
			ring = true
		case prog.OpUringRead:
			ring, scratch = true, true
		case prog.OpODirect:
			scratch = true
		case prog.OpUffdWP:
			uffd = true
		}
	}
	for i := range r.pipes {
		r.pipes[i] = [2]int{-1, -1}
		if pipes[i] {
			var fds [2]int
			if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err == nil {
				r.pipes[i] = fds
			}
		}
	}
	if scratch {
		r.openScratch()
		if r.bfd >= 0 {
			unix.Ftruncate(r.bfd, 0)
		}
	}
	r.ringErr = 0
	if ring {
		r.ringErr = r.ring.setup(8)
	}
	r.uffd = -1
	if uffd {
		fd, e, reason := uffdOpen()
		if e == 0 && fd >= 0 {
			r.uffd = fd
		} else {
			r.uffdCode, r.uffdErr = obs.SkipNoUffd, e
			if strings.Contains(reason, "WP_ASYNC") {
				r.uffdCode = obs.SkipNoWPAsync
			}
		}
	}
}

// cleanupPinned releases the per-program resources. Main process only.
func (m *machine) cleanupPinned() {
	r := &m.pin
	for i := range r.pipes {
		for _, fd := range r.pipes[i] {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		r.pipes[i] = [2]int{-1, -1}
	}
	r.ring.close()
	if r.uffd >= 0 {
		unix.Close(r.uffd)
		r.uffd = -1
	}
}
