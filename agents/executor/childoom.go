package executor

// A memory-cgroup limit on the child's side of a fork (prog.Op.ChildOOM):
// the child is born (clone3 with CLONE_INTO_CGROUP) into a memory cgroup
// of its own, a sibling of the executor's, whose memory.max is BYTES
// above what the group holds, so the allocations of its own context
// before user space (under Async-fork, its copy of the page tables,
// charged to the child's group) run into the limit and the group's OOM
// killer, whose only candidate is the child. The parent's own fork
// allocations are charged to the executor's group and are not limited.
// The child is stopped at the user-space boundary (SIGSTOP, as for
// childfail); then the limit is lifted, the child moved back into the
// executor's group and continued. memory.events of the child's group say
// whether the limit was reached and the OOM killer ran; the kernel log's
// OOM report (if any) says where.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// cloneArgs is struct clone_args (CLONE_ARGS_SIZE_VER2, 88 bytes).
type cloneArgs struct {
	flags, pidfd, childTid, parentTid, exitSignal, stack, stackSize, tls, setTid, setTidSize, cgroup uint64
}

const cloneIntoCgroup = 0x200000000

var childGroup struct {
	once sync.Once
	dir  string
	err  error
}

// childMemcgDir creates, once, the child's memory cgroup beside the
// executor's, with the executor's memory.async_fork value where the
// kernel has that file.
func childMemcgDir() (string, error) {
	childGroup.once.Do(func() {
		exe, err := memcgDir()
		if err != nil {
			childGroup.err = err
			return
		}
		dir := filepath.Join(filepath.Dir(exe), fmt.Sprintf("forkfuzz-child-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			childGroup.err = fmt.Errorf("create the child's memory cgroup: %w", err)
			return
		}
		if b, err := os.ReadFile(filepath.Join(exe, "memory.async_fork")); err == nil {
			os.WriteFile(filepath.Join(dir, "memory.async_fork"), bytes.TrimSpace(b), 0)
		}
		childGroup.dir = dir
	})
	return childGroup.dir, childGroup.err
}

// childLimit is a child_oom limit armed before the fork.
type childLimit struct {
	dir    string
	dirFd  int
	events map[string]int64
	what   string
}

// armChildOOM sets the child's group's memory.max to what it holds plus
// budget and opens the group for clone3.
func armChildOOM(budget uint64) (*childLimit, error) {
	dir, err := childMemcgDir()
	if err != nil {
		return nil, err
	}
	if rfd, err := unix.Open(filepath.Join(dir, "memory.reclaim"), unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Write(rfd, []byte("1G"))
		unix.Close(rfd)
	}
	cur, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return nil, err
	}
	used, err := strconv.ParseUint(strings.TrimSpace(string(cur)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s/memory.current %q", dir, cur)
	}
	l := &childLimit{dir: dir, events: memcgEvents(dir)}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatUint(used+budget, 10)), 0); err != nil {
		return nil, fmt.Errorf("%s/memory.max: %w", dir, err)
	}
	l.dirFd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.WriteFile(filepath.Join(dir, "memory.max"), []byte("max"), 0)
		return nil, err
	}
	adj, _ := os.ReadFile("/proc/self/oom_score_adj")
	l.what = fmt.Sprintf("%s/memory.max=%d (memory.current %d + child_oom %d), the child born there (clone3 CLONE_INTO_CGROUP) with oom_score_adj %s",
		dir, used+budget, used, budget, strings.TrimSpace(string(adj)))
	return l, nil
}

// lift ends the limit once the child stopped at user space or died:
// memory.max back to max, a live child moved back into the executor's
// group; it says what the group's memory.events did.
func (l *childLimit) lift(pid int, alive bool) (hit bool, what string) {
	unix.Close(l.dirFd)
	os.WriteFile(filepath.Join(l.dir, "memory.max"), []byte("max"), 0)
	if alive {
		if exe, err := memcgDir(); err == nil {
			if err := os.WriteFile(filepath.Join(exe, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				what = fmt.Sprintf("moving the child back into %s failed: %v; ", exe, err)
			}
		}
	}
	ev := memcgEvents(l.dir)
	d := func(k string) int64 { return ev[k] - l.events[k] }
	return d("max") > 0, what + fmt.Sprintf("%s; memory.events of the child's group: max +%d, oom +%d, oom_kill +%d", l.what, d("max"), d("oom"), d("oom_kill"))
}
