package vm

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// console captures a VM's serial console: every byte goes to a log file,
// and the most recent maxConsole bytes stay in memory, addressed by their
// offset since the console was created so callers can ask for "everything
// since offset X".
type console struct {
	mu   sync.Mutex
	buf  []byte
	base int64 // offset of buf[0]
	file *os.File
}

const maxConsole = 4 << 20

func newConsole(path string) *console {
	c := &console{}
	if path != "" {
		c.file, _ = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	return c
}

func (c *console) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		c.file.Write(b)
	}
	c.buf = append(c.buf, b...)
	if over := len(c.buf) - maxConsole; over > 0 {
		c.buf = append(c.buf[:0:0], c.buf[over:]...)
		c.base += int64(over)
	}
	return len(b), nil
}

// Len is the offset just past the last byte written.
func (c *console) Len() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base + int64(len(c.buf))
}

// Since returns what was written from offset off on (as much as is still
// in memory) and the offset where it ends.
func (c *console) Since(off int64) ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if off < c.base {
		off = c.base
	}
	end := c.base + int64(len(c.buf))
	if off > end {
		off = end
	}
	return append([]byte(nil), c.buf[off-c.base:]...), end
}

// Tail returns the last n bytes.
func (c *console) Tail(n int) []byte {
	b, _ := c.Since(c.Len() - int64(n))
	return b
}

func (c *console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
}

// pipeCapture copies a pipe (QEMU's serial console on its stdout) into a
// console, and can tell when everything written into the pipe so far has
// reached the console (catchUp), so a report printed before the guest sent
// a result is seen with that result.
//
// The copier waits with poll, then marks itself busy before it reads: so
// "the pipe is empty and the copier is not busy" means every byte written
// before that moment is in the console.
type pipeCapture struct {
	r       *os.File
	fd      int // r's descriptor (blocking; only the copier reads it)
	con     *console
	busy    atomic.Bool
	drained chan struct{} // closed at end of file
}

func capturePipe(r *os.File, con *console) *pipeCapture {
	pc := &pipeCapture{r: r, fd: int(r.Fd()), con: con, drained: make(chan struct{})}
	go func() {
		defer close(pc.drained)
		defer r.Close()
		buf := make([]byte, 64<<10)
		for {
			fds := []unix.PollFd{{Fd: int32(pc.fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != nil {
				if err == unix.EINTR {
					continue
				}
				return
			}
			pc.busy.Store(true)
			n, err := unix.Read(pc.fd, buf)
			if n > 0 {
				con.Write(buf[:n])
			}
			pc.busy.Store(false)
			if n == 0 || (err != nil && err != unix.EINTR && err != unix.EAGAIN) {
				return
			}
		}
	}()
	return pc
}

// catchUp waits (up to max) until the pipe is empty and the copier idle.
func (pc *pipeCapture) catchUp(max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		select {
		case <-pc.drained:
			return
		default:
		}
		n, err := unix.IoctlGetInt(pc.fd, unix.TIOCINQ)
		if err != nil {
			return
		}
		if n == 0 && !pc.busy.Load() {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// wait waits (up to max) for the end of the pipe.
func (pc *pipeCapture) wait(max time.Duration) {
	select {
	case <-pc.drained:
	case <-time.After(max):
	}
}
