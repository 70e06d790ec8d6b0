package campaign

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

const lockHelperEnv = "FORKFUZZ_TEST_LOCK_WORKDIR"

// TestLockHelperProcess is not a test: run with lockHelperEnv set, it
// locks that workdir, says "locked PID" or "busy ERROR", and holds the
// lock until its stdin closes.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("the helper process of TestLockWorkdir")
	}
	unlock, err := LockWorkdir(dir)
	if err != nil {
		fmt.Printf("busy %v\n", err)
		os.Exit(0)
	}
	fmt.Printf("locked %d\n", os.Getpid())
	io.Copy(io.Discard, os.Stdin)
	unlock()
	os.Exit(0)
}

// lockHelper is another process that tries to lock dir.
type lockHelper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	said  string // "locked PID" or "busy ERROR"
}

func startLockHelper(t *testing.T, dir string) *lockHelper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &lockHelper{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { h.stop() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("lock helper: %v", err)
	}
	h.said = strings.TrimSpace(line)
	return h
}

func (h *lockHelper) locked() bool { return strings.HasPrefix(h.said, "locked ") }

func (h *lockHelper) stop() {
	h.stdin.Close()
	h.cmd.Wait()
}

func wantBusy(t *testing.T, err error, dir string, pid int) {
	t.Helper()
	var busy *WorkdirBusyError
	if !errors.As(err, &busy) || busy.Dir != dir || busy.PID != pid {
		t.Fatalf("err %v, want a WorkdirBusyError for %s by PID %d", err, dir, pid)
	}
	if want := fmt.Sprintf("workdir %s is in use by PID %d", dir, pid); !strings.Contains(err.Error(), want) {
		t.Fatalf("err %q does not say %q", err, want)
	}
}

func TestLockWorkdir(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, dir string)
	}{
		{"free: locked, PID written", func(t *testing.T, dir string) {
			unlock, err := LockWorkdir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			b, _ := os.ReadFile(filepath.Join(dir, LockFile))
			if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
				t.Fatalf("lock file holds %q, want this PID %d", b, os.Getpid())
			}
		}},
		{"missing workdir is created", func(t *testing.T, dir string) {
			sub := filepath.Join(dir, "a", "b")
			unlock, err := LockWorkdir(sub)
			if err != nil {
				t.Fatal(err)
			}
			unlock()
		}},
		{"held by another process: busy with its PID", func(t *testing.T, dir string) {
			h := startLockHelper(t, dir)
			if !h.locked() {
				t.Fatalf("helper: %s", h.said)
			}
			_, err := LockWorkdir(dir)
			wantBusy(t, err, dir, h.cmd.Process.Pid)
			h.stop()
			unlock, err := LockWorkdir(dir)
			if err != nil {
				t.Fatalf("after the holder ended: %v", err)
			}
			unlock()
		}},
		{"stale file of a killed process does not block", func(t *testing.T, dir string) {
			h := startLockHelper(t, dir)
			if !h.locked() {
				t.Fatalf("helper: %s", h.said)
			}
			h.cmd.Process.Kill()
			h.cmd.Wait()
			b, _ := os.ReadFile(filepath.Join(dir, LockFile))
			if strings.TrimSpace(string(b)) != strconv.Itoa(h.cmd.Process.Pid) {
				t.Fatalf("lock file holds %q, want the dead helper's PID", b)
			}
			unlock, err := LockWorkdir(dir)
			if err != nil {
				t.Fatal(err)
			}
			unlock()
		}},
		{"reentrant in one process, released by the last unlock", func(t *testing.T, dir string) {
			u1, err := LockWorkdir(dir)
			if err != nil {
				t.Fatal(err)
			}
			u2, err := LockWorkdir(filepath.Join(dir, ".")) // another spelling, the same file
			if err != nil {
				t.Fatalf("second lock in one process: %v", err)
			}
			u1()
			u1() // twice: no effect
			if h := startLockHelper(t, dir); h.locked() {
				t.Fatal("another process locked the workdir while one holder was left")
			} else if !strings.Contains(h.said, fmt.Sprintf("in use by PID %d", os.Getpid())) {
				t.Fatalf("helper: %s", h.said)
			}
			u2()
			if h := startLockHelper(t, dir); !h.locked() {
				t.Fatalf("after the last unlock: %s", h.said)
			}
		}},
		{"Run refuses a busy workdir and writes nothing", func(t *testing.T, dir string) {
			h := startLockHelper(t, dir)
			if !h.locked() {
				t.Fatalf("helper: %s", h.said)
			}
			tg := &modelTarget{}
			st, err := Run(context.Background(), Config{Target: tg, Seed: 1, Programs: 5, Weights: noThreads(gen.DefaultWeights()), Workdir: dir})
			wantBusy(t, err, dir, h.cmd.Process.Pid)
			if st != nil || tg.runs.Load() != 0 {
				t.Fatalf("ran %d programs on a busy workdir", tg.runs.Load())
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Fatalf("workdir holds %d entries, want only %s", len(ents), LockFile)
			}
		}},
		{"Run inside a holder of this process (a gate) runs", func(t *testing.T, dir string) {
			unlock, err := LockWorkdir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st, err := Run(ctx, Config{Target: &modelTarget{}, Seed: 1, Programs: 3, Weights: noThreads(gen.DefaultWeights()), Workdir: dir})
			if err != nil || st.Programs != 3 {
				t.Fatalf("Run under this process's lock: %v", err)
			}
			if h := startLockHelper(t, dir); h.locked() {
				t.Fatal("Run's unlock released the outer holder's lock")
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, t.TempDir()) })
	}
}
