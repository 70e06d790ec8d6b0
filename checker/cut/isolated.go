package cut

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Porcupine's search can need far more memory than time suggests (80k
// overlapping writes exceed 6 GB within seconds, and its timeout bounds
// time only). Isolated runs it in a separate worker process whose address
// space is capped, so a blow-up costs an Unknown verdict, not the
// campaign: the worker reads one request on stdin and writes one verdict
// on stdout (ServeWorker).

// Isolated runs porcupine in worker processes with capped memory.
type Isolated struct {
	// Command returns the command that runs ServeWorker (e.g. the forkfuzz
	// binary with a hidden subcommand).
	Command func() *exec.Cmd
	// MemLimit caps the worker's resident memory in bytes: a watchdog
	// kills it beyond that (GOMEMLIMIT makes its GC try to stay below).
	MemLimit uint64
}

type workerRequest struct {
	History   *History `json:"history"`
	TimeoutNS int64    `json:"timeout_ns"`
}

type workerResponse struct {
	Result Result `json:"result"`
	Reason string `json:"reason"`
}

// Porcupine decides h like the package-level Porcupine, in a worker. A
// worker that runs out of its memory cap or dies gives Unknown with the
// reason, never Ok.
func (c *Isolated) Porcupine(h *History, timeout time.Duration) Verdict {
	unknown := func(format string, args ...any) Verdict {
		return Verdict{Result: Unknown, Reason: "porcupine worker: " + fmt.Sprintf(format, args...)}
	}
	req, err := json.Marshal(workerRequest{History: h, TimeoutNS: int64(timeout)})
	if err != nil {
		return unknown("encode history: %v", err)
	}
	cmd := c.Command()
	cmd.Env = append(cmd.Environ(), "GOMEMLIMIT="+strconv.FormatUint(c.MemLimit, 10))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return unknown("%v", err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return unknown("start: %v", err)
	}
	// The worker waits for its input: cap it before it can allocate. The
	// address-space limit is only a backstop (Go reserves address space
	// it never touches); the watchdog enforces the cap on resident memory.
	if err := capAddressSpace(cmd.Process.Pid, 4*c.MemLimit+1<<30); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return unknown("cap memory: %v", err)
	}
	var overCap atomic.Bool
	done := make(chan struct{})
	go func() {
		deadline := time.Time{}
		if timeout > 0 {
			// Porcupine stops at its own timeout; this is a backstop
			// for a worker that does not.
			deadline = time.Now().Add(2*timeout + 10*time.Second)
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if rss, ok := residentBytes(cmd.Process.Pid); ok && rss > c.MemLimit {
				overCap.Store(true)
				cmd.Process.Kill()
				return
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				cmd.Process.Kill()
				return
			}
		}
	}()
	_, werr := stdin.Write(req)
	stdin.Close()
	err = cmd.Wait()
	close(done)
	if overCap.Load() {
		return unknown("exceeded its memory cap of %d MiB", c.MemLimit>>20)
	}
	if err != nil || werr != nil {
		msg := strings.TrimSpace(errb.String())
		if strings.Contains(msg, "out of memory") || strings.Contains(msg, "cannot allocate memory") {
			return unknown("ran out of address space (cap %d MiB)", c.MemLimit>>20)
		}
		return unknown("died (%v): %.300s", errors.Join(err, werr), msg)
	}
	var resp workerResponse
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return unknown("bad response: %v", err)
	}
	return Verdict{Result: resp.Result, Reason: resp.Reason}
}

// statusField returns a "kB" field of /proc/PID/status in bytes.
func statusField(pid int, field string) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

func residentBytes(pid int) (uint64, bool) { return statusField(pid, "VmRSS:") }

// capAddressSpace limits pid's address space to what it maps now plus
// limit bytes.
func capAddressSpace(pid int, limit uint64) error {
	var vm uint64
	// The runtime may still be starting; wait until /proc shows it mapped.
	for try := 0; try < 100 && vm == 0; try++ {
		vm, _ = statusField(pid, "VmSize:")
		if vm == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	rl := unix.Rlimit{Cur: vm + limit, Max: vm + limit}
	return unix.Prlimit(pid, unix.RLIMIT_AS, &rl, nil)
}

// maxWorkerTimeout bounds a worker's search whatever the request says.
const maxWorkerTimeout = 10 * time.Minute

// ServeWorker is the worker's side of Isolated: it reads one request from
// r, runs porcupine and writes the verdict to w.
func ServeWorker(r io.Reader, w io.Writer) error {
	var req workerRequest
	if err := json.NewDecoder(r).Decode(&req); err != nil {
		return fmt.Errorf("porcupine worker: read request: %w", err)
	}
	if req.History == nil {
		return errors.New("porcupine worker: request has no history")
	}
	timeout := time.Duration(req.TimeoutNS)
	if timeout <= 0 || timeout > maxWorkerTimeout {
		timeout = maxWorkerTimeout
	}
	v, _, _ := Porcupine(req.History, timeout)
	return json.NewEncoder(w).Encode(workerResponse{Result: v.Result, Reason: v.Reason})
}

var (
	fallbackMu sync.Mutex
	fallback   func(h *History, timeout time.Duration) Verdict
)

// UseIsolated makes Decide run porcupine through c (nil: in this process).
func UseIsolated(c *Isolated) {
	fallbackMu.Lock()
	defer fallbackMu.Unlock()
	if c == nil {
		fallback = nil
		return
	}
	fallback = c.Porcupine
}

func porcupineFallback(h *History, timeout time.Duration) Verdict {
	fallbackMu.Lock()
	f := fallback
	fallbackMu.Unlock()
	if f != nil {
		return f(h, timeout)
	}
	v, _, _ := Porcupine(h, timeout)
	return v
}
