package executor

// Memory-cgroup limits on fork (prog.Op.OOMMemcg): the executor process
// lives in a cgroup v2 group of its own; right before a fork with
// oom_memcg=B it sets the group's memory.max to memory.current + B and
// its oom_score_adj to -1000 (the OOM killer then finds no victim and the
// charge fails), so fork runs out of memory for real and fails with
// ENOMEM; right after the fork the limit goes back to "max". Main process
// only.

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

const cgroupRoot = "/sys/fs/cgroup"

var memcgSetup struct {
	once sync.Once
	dir  string
	err  error
}

// memcgDir moves this process into a cgroup of its own, once, and returns
// the group's directory.
func memcgDir() (string, error) {
	memcgSetup.once.Do(func() { memcgSetup.dir, memcgSetup.err = setupMemcg() })
	return memcgSetup.dir, memcgSetup.err
}

func setupMemcg() (string, error) {
	if _, err := os.Stat(cgroupRoot + "/cgroup.controllers"); err != nil {
		return "", fmt.Errorf("no cgroup v2 hierarchy at %s: %w", cgroupRoot, err)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			cur = p
		}
	}
	parent := filepath.Join(cgroupRoot, cur)
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
		return "", fmt.Errorf("enable the memory controller under %s: %w", parent, err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("forkfuzz-executor-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create memory cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("move the executor into %s: %w", dir, err)
	}
	return dir, nil
}

// memcgLimit is an oom_memcg limit ready to be armed: memory.max is
// written with raw system calls on a file opened in advance, right around
// the raw fork (rawForkInjected), because any page the process faults in while the limit is
// on (a Go heap allocation, say) could not be charged, and with
// oom_score_adj -1000 there is no OOM victim: the fault would retry
// forever.
type memcgLimit struct {
	dir    string
	fd     int
	limit  [24]byte
	limitN int
	max    [4]byte
	oldAdj []byte
	events map[string]int64
	quiet  quiescence // ended by disarm
}

// armMemcg prepares the limit for one fork (see memcgLimit); it returns
// what it will do, for the observation.
func armMemcg(budget uint64) (*memcgLimit, string, error) {
	dir, err := memcgDir()
	if err != nil {
		return nil, "", err
	}
	// Reclaim what the group can give back (page cache, slab), so that
	// the limit is not met by reclaim but by running out of memory.
	// (A plain unix.Write: memory.reclaim answers EAGAIN when it could
	// not reclaim all that was asked, which os.File would wait on forever
	// in the poller.)
	reclaimed := false
	if rfd, err := unix.Open(filepath.Join(dir, "memory.reclaim"), unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		_, err = unix.Write(rfd, []byte("1G"))
		reclaimed = err == nil || err == unix.EAGAIN
		unix.Close(rfd)
	}
	cur, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return nil, "", err
	}
	used, err := strconv.ParseUint(strings.TrimSpace(string(cur)), 10, 64)
	if err != nil {
		return nil, "", fmt.Errorf("memory.current %q", cur)
	}
	l := &memcgLimit{dir: dir, events: memcgEvents(dir)}
	l.oldAdj, _ = os.ReadFile("/proc/self/oom_score_adj")
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0); err != nil {
		return nil, "", fmt.Errorf("oom_score_adj -1000: %w", err)
	}
	max := used + budget
	// With swap on (the VM guest has it), the group would swap rather
	// than run out of memory: no swap while the limit is armed.
	os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
	l.fd, err = unix.Open(filepath.Join(dir, "memory.max"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		l.fd = -1
		l.disarm()
		return nil, "", fmt.Errorf("open memory.max: %w", err)
	}
	l.limitN = len(strconv.AppendUint(l.limit[:0], max, 10))
	copy(l.max[:], "max")
	return l, fmt.Sprintf("%s/memory.max=%d (memory.current %d + oom_memcg %d; memory.reclaim emptied the group first: %v), oom_score_adj=-1000", dir, max, used, budget, reclaimed), nil
}

// disarm lifts the limit; hit reports whether the group reached it
// (memory.events "max" grew) and how often the OOM killer was invoked.
func (l *memcgLimit) disarm() (hit bool, what string) {
	os.WriteFile(filepath.Join(l.dir, "memory.max"), []byte("max"), 0)
	os.WriteFile(filepath.Join(l.dir, "memory.swap.max"), []byte("max"), 0)
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
	if len(l.oldAdj) > 0 {
		os.WriteFile("/proc/self/oom_score_adj", bytes.TrimSpace(l.oldAdj), 0)
	}
	if l.quiet.on {
		l.quiet.end()
		stderrMark(limitLiftedMarker)
	}
	ev := memcgEvents(l.dir)
	d := func(k string) int64 { return ev[k] - l.events[k] }
	return d("max") > 0, fmt.Sprintf("memory.events during the fork: max +%d, oom +%d, oom_kill +%d", d("max"), d("oom"), d("oom_kill"))
}

func memcgEvents(dir string) map[string]int64 {
	out := map[string]int64{}
	b, _ := os.ReadFile(filepath.Join(dir, "memory.events"))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = n
		}
	}
	return out
}
