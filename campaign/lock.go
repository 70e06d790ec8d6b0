package campaign

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// LockFile is the file in a workdir that Run locks (flock(2)) for as long
// as it runs; it holds the PID of the process that locked it last. The
// kernel drops the lock when that process dies, so a file left behind by a
// killed run blocks nothing.
const LockFile = ".lock"

// WorkdirBusyError says that another process holds a workdir's lock.
type WorkdirBusyError struct {
	Dir string
	PID int // 0: not known (the holder had not written it yet, or is no forkfuzz)
}

func (e *WorkdirBusyError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "PID " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("workdir %s is in use by %s (%s is locked: one campaign at a time per workdir); wait for it to end or use another --workdir",
		e.Dir, who, filepath.Join(e.Dir, LockFile))
}

// workdirLocks are the workdir locks this process holds, by the lock
// file's identity: a second LockWorkdir of a workdir this process holds
// (a gate's campaign, a campaign the gate abandoned and a new one) shares
// the lock instead of deadlocking on it (flock locks an open file, so a
// second open of the same file in one process would conflict).
var workdirLocks struct {
	mu   sync.Mutex
	held map[fileID]*heldLock
}

type fileID struct{ dev, ino uint64 }

type heldLock struct {
	f    *os.File
	refs int
}

// LockWorkdir creates dir if needed and locks it for this process: a
// campaign writes its findings, corpus and stats there, and two campaigns
// on one workdir would mix them. Another process holding the lock is a
// *WorkdirBusyError naming its PID. Within one process the lock is
// shared: it is released when every unlock returned was called (or when
// the process exits). unlock may be called more than once.
func LockWorkdir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("workdir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	workdirLocks.mu.Lock()
	defer workdirLocks.mu.Unlock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("workdir: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("workdir: %s: %w", path, err)
	}
	id := fileID{uint64(st.Dev), st.Ino}
	if h := workdirLocks.held[id]; h != nil {
		f.Close() // another descriptor: closing it leaves h's lock alone
		h.refs++
		return releaser(id), nil
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &WorkdirBusyError{Dir: dir, PID: lockHolder(path)}
		}
		return nil, fmt.Errorf("workdir: locking %s: %w", path, err)
	}
	// The PID only names the holder to a second user; the lock holds
	// without it.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if workdirLocks.held == nil {
		workdirLocks.held = map[fileID]*heldLock{}
	}
	workdirLocks.held[id] = &heldLock{f: f, refs: 1}
	return releaser(id), nil
}

// releaser returns an unlock function that drops one reference to id.
func releaser(id fileID) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			workdirLocks.mu.Lock()
			defer workdirLocks.mu.Unlock()
			h := workdirLocks.held[id]
			if h == nil {
				return
			}
			if h.refs--; h.refs == 0 {
				delete(workdirLocks.held, id)
				h.f.Close() // releases the flock
			}
		})
	}
}

// lockHolder reads the PID in a lock file another process holds; it
// retries briefly, since the holder writes it just after taking the lock.
func lockHolder(path string) int {
	for try := 0; try < 10; try++ {
		b, err := fsutil.ReadFileLimited(path, 64) // forkfuzz writes one short line
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}
