package vm

// VM snapshots: the state of a VM right after its agent's hello, saved
// once per (QEMU, its arguments, kernel, initramfs) and loaded instead of
// a cold boot: a restart after a kernel BUG, the pool's further VMs, and
// later runs on the same kernel with the same forkfuzz build. A restored
// VM is the booted VM as it was before its first program, so it is as
// fresh as a cold boot; loading it takes about a second under TCG where
// a boot takes 10-45 s (docs/qemu.md).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forkfuzz/forkfuzz/kernel"
)

// snapKeep is how many saved states the state directory keeps (the
// most recently used; each is about the guest's used memory, 150-250 MB
// for a 1 GiB guest).
const snapKeep = 6

// qmpTimeout bounds each QMP exchange of a save or restore.
const qmpTimeout = 30 * time.Second

// snapshots is a target's saved-state store.
type snapshots struct {
	dir, key string
	// off says why the target boots cold every time ("" : it uses
	// snapshots).
	off string
	mu  sync.Mutex
	// failed: a restore failed in this run; boot cold from now on.
	failed bool
}

// snapMeta is what the agent's hello said when the state was saved: a
// restored VM sends no hello.
type snapMeta struct {
	Uname string   `json:"uname"`
	Steps []string `json:"steps"`
	Impls []string `json:"impls"`
	// FileSystems: the hello's (file region kinds the guest can host).
	FileSystems []string      `json:"file_systems,omitempty"`
	Boot        time.Duration `json:"boot"`
	Saved       time.Time     `json:"saved"`
	// Console is the boot's console up to the hello.
	Console string `json:"console"`
}

// shellSafe: the characters a path may have to go unquoted into QEMU's
// "exec:" migration command (run by /bin/sh).
const shellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%"

// initSnapshots decides where t's saved states live and their key: the
// QEMU binary (path, size, modification time), its arguments with the
// per-boot socket paths and the run's initramfs path left out, and the
// kernel's and initramfs's contents. Called once the initramfs is built and the accelerator
// chosen.
func (t *Target) initSnapshots() {
	s := &snapshots{dir: t.cfg.SnapshotDir}
	t.snap = s
	if t.cfg.NoSnapshot {
		s.off = "snapshots off (--no-vm-snapshot)"
		return
	}
	if s.dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			s.off = "no cache directory for saved states: " + err.Error()
			return
		}
		s.dir = filepath.Join(c, "forkfuzz", "vmstate")
	}
	if strings.Trim(s.dir, shellSafe) != "" {
		s.off = fmt.Sprintf("the state directory %q has characters QEMU's exec: migration would need quoted", s.dir)
		return
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		s.off = "state directory: " + err.Error()
		return
	}
	h := sha256.New()
	bin := t.cfg.QEMU
	if p, err := exec.LookPath(bin); err == nil {
		bin = p
	}
	if st, err := os.Stat(bin); err == nil {
		fmt.Fprintf(h, "qemu %s %d %d\n", bin, st.Size(), st.ModTime().UnixNano())
	} else {
		s.off = "QEMU binary: " + err.Error()
		return
	}
	// The initramfs's path is the run's; its content is hashed below.
	args := strings.Join(qemu{}.args(t, "/SOCKDIR/s"), "\x00")
	fmt.Fprintf(h, "args %s\n", strings.ReplaceAll(args, t.initrd, "INITRAMFS"))
	for _, f := range []string{t.cfg.Kernel, t.initrd} {
		sum, err := kernel.FileSHA256(f)
		if err != nil {
			s.off = "hash " + f + ": " + err.Error()
			return
		}
		fmt.Fprintf(h, "file %s\n", sum)
	}
	s.key = hex.EncodeToString(h.Sum(nil))[:24]
}

func (s *snapshots) statePath() string { return filepath.Join(s.dir, s.key+".state") }
func (s *snapshots) metaPath() string  { return filepath.Join(s.dir, s.key+".json") }

// saved returns the saved state's metadata, or nil when a boot must be
// cold (snapshots off, none saved yet, a restore failed in this run).
func (s *snapshots) saved() *snapMeta {
	if s == nil || s.off != "" {
		return nil
	}
	s.mu.Lock()
	failed := s.failed
	s.mu.Unlock()
	if failed {
		return nil
	}
	b, err := os.ReadFile(s.metaPath())
	if err != nil {
		return nil
	}
	var m snapMeta
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	if st, err := os.Stat(s.statePath()); err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return nil
	}
	now := time.Now()
	os.Chtimes(s.statePath(), now, now) // most recently used: evicted last
	return &m
}

// restoreFailed makes the rest of the run boot cold, and removes the state
// when QEMU could not load it (no use to later runs either); one that
// loaded but whose agent did not answer in time (a loaded machine) is
// kept for later runs.
func (s *snapshots) restoreFailed(err error) {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	var slow *slowRestore
	if errors.As(err, &slow) {
		return
	}
	os.Remove(s.statePath())
	os.Remove(s.metaPath())
}

// slowRestore is a restore whose state QEMU loaded but whose agent did
// not answer in time, or whose connection broke: the state may be good.
type slowRestore struct{ err error }

func (e *slowRestore) Error() string { return e.err.Error() }
func (e *slowRestore) Unwrap() error { return e.err }

// save writes the running VM's state (QMP at qmpPath): the VM is stopped
// while it is written, then resumed. The state goes to a temporary file
// renamed into place, so concurrent runs never load a partial one.
func (s *snapshots) save(qmpPath string, meta snapMeta) (int64, error) {
	if s == nil || s.off != "" {
		return 0, errors.New(s.off)
	}
	q, err := dialQMP(qmpPath, qmpTimeout)
	if err != nil {
		return 0, err
	}
	defer q.close()
	if _, err := q.do("stop", nil, qmpTimeout); err != nil {
		return 0, err
	}
	defer q.do("cont", nil, qmpTimeout)
	tmp := s.statePath() + ".tmp" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer os.Remove(tmp)
	// Not throttled: the guest is stopped, the file is local.
	if _, err := q.do("migrate-set-parameters", map[string]any{"max-bandwidth": int64(1) << 40}, qmpTimeout); err != nil {
		return 0, err
	}
	if _, err := q.do("migrate", map[string]any{"uri": "exec:cat > " + tmp}, qmpTimeout); err != nil {
		return 0, err
	}
	if err := waitMigration(q); err != nil {
		return 0, err
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return 0, err
	}
	b, _ := json.Marshal(meta)
	metaTmp := tmp + ".json"
	defer os.Remove(metaTmp)
	if err := os.WriteFile(metaTmp, b, 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, s.statePath()); err != nil {
		return 0, err
	}
	if err := os.Rename(metaTmp, s.metaPath()); err != nil {
		return 0, err
	}
	s.evict()
	return st.Size(), nil
}

// waitMigration polls an outgoing migration until it completes.
func waitMigration(q *qmpConn) error {
	deadline := time.Now().Add(2 * qmpTimeout)
	for time.Now().Before(deadline) {
		raw, err := q.do("query-migrate", nil, qmpTimeout)
		if err != nil {
			return err
		}
		var m struct {
			Status string `json:"status"`
			Desc   string `json:"error-desc"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("qmp query-migrate: %w", err)
		}
		switch m.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("migration %s: %s", m.Status, m.Desc)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("migration did not complete within a minute")
}

// resume waits for QEMU (QMP at qmpPath) to load an incoming state and
// runs the VM.
func resume(qmpPath string, timeout time.Duration) error {
	q, err := dialQMP(qmpPath, qmpTimeout)
	if err != nil {
		return err
	}
	defer q.close()
	deadline := time.Now().Add(timeout)
	for {
		st, err := q.status(qmpTimeout)
		if err != nil {
			return err
		}
		switch st {
		case "inmigrate":
			if time.Now().After(deadline) {
				return &slowRestore{fmt.Errorf("the saved state did not load within %v", timeout)}
			}
			time.Sleep(20 * time.Millisecond)
			continue
		case "running":
			return nil
		case "paused", "postmigrate", "prelaunch":
			_, err := q.do("cont", nil, qmpTimeout)
			return err
		}
		return fmt.Errorf("after loading the saved state QEMU is %q", st)
	}
}

// evict keeps the snapKeep most recently used states.
func (s *snapshots) evict() {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type state struct {
		key string
		mod time.Time
	}
	var states []state
	for _, e := range ents {
		key, ok := strings.CutSuffix(e.Name(), ".state")
		if !ok {
			continue
		}
		if info, err := e.Info(); err == nil {
			states = append(states, state{key, info.ModTime()})
		}
	}
	sort.Slice(states, func(i, j int) bool { return states[i].mod.After(states[j].mod) })
	for _, st := range states[min(len(states), snapKeep):] {
		os.Remove(filepath.Join(s.dir, st.key+".state"))
		os.Remove(filepath.Join(s.dir, st.key+".json"))
	}
}
