package redis

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/bench/latency"
)

// Request runs the scenario somewhere else (a VM's guest agent runs
// `forkfuzz bench-worker` with {"redis": Request} on its stdin).
type Request struct {
	Bin       Binary          `json:"bin"`
	Dir       string          `json:"dir"`
	Keys      int             `json:"keys"`
	ValueSize int             `json:"value_size"`
	Writers   int             `json:"writers"`
	Rounds    int             `json:"rounds"`
	BeforeMs  int             `json:"before_ms"`
	AfterMs   int             `json:"after_ms"`
	Seed      uint64          `json:"seed"`
	Corrupt   string          `json:"corrupt,omitempty"`
	Writes    []latency.Write `json:"writes,omitempty"`
}

// Response is the scenario's outcome there.
type Response struct {
	Uname   string   `json:"uname"`
	Writes  []string `json:"writes,omitempty"`
	Summary *Summary `json:"summary"`
}

// Config turns a request into a scenario configuration.
func (q Request) Config() Config {
	return Config{Bin: q.Bin, Dir: q.Dir, Keys: q.Keys, ValueSize: q.ValueSize, Writers: q.Writers, Rounds: q.Rounds,
		Before: time.Duration(q.BeforeMs) * time.Millisecond, After: time.Duration(q.AfterMs) * time.Millisecond, Seed: q.Seed, Corrupt: q.Corrupt}
}

// Serve runs a request here: the writes (a fork mode), then the scenario.
func Serve(q Request) (*Response, error) {
	applied, undo, err := latency.ApplyWrites(q.Writes)
	defer undo()
	if err != nil {
		return nil, err
	}
	cfg := q.Config()
	cfg.Log = os.Stderr
	res, err := Run(cfg)
	if err != nil {
		return nil, err
	}
	return &Response{Uname: latency.Uname(), Writes: applied, Summary: res.Summarize()}, nil
}

// GuestFiles lists the host files a guest needs to run b: the binary and
// every shared library ldd finds (with b's own library directory), each
// to go at the same path in the guest.
func GuestFiles(b Binary) ([]string, error) {
	real, err := filepath.EvalSymlinks(b.Path)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ldd", real)
	if b.LibDir != "" {
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+b.LibDir)
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", real, err)
	}
	if bytes.Contains(out, []byte("not found")) {
		return nil, fmt.Errorf("ldd %s: a library is missing: %s", real, out)
	}
	var files []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				files = append(files, f)
			}
		}
	}
	return files, nil
}
