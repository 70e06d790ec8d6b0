// Package latency is forkfuzz's fork-latency benchmark (forkfuzz bench
// fork): fork() time against resident memory, with 4 KiB pages and with
// THP, the parent's stall on its first writes after fork, the child's time
// to its first user-space instruction and its first-read cost, on the
// host and in QEMU VMs booted with a kernel under test; CSV, an SVG plot,
// ratios against a baseline and a CI gate on them.
//
// The measuring itself is executor.ForkBench (the raw fork lives in
// agents/executor), run in a separate worker process (forkfuzz
// bench-worker) on the host or in the guest.
package latency

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

// Request is what a worker is asked: every size, Reps forks each.
type Request struct {
	Sizes []int64 `json:"sizes"`
	THP   bool    `json:"thp"`
	Reps  int     `json:"reps"`
	// Writes are made before measuring and undone after (e.g.
	// /sys/fs/cgroup/memory.async_fork = 1: the worker runs in that cgroup).
	Writes []Write `json:"writes,omitempty"`
	// PinBytes: ForkBenchSpec.PinBytes.
	PinBytes int64 `json:"pin_bytes,omitempty"`
}

// Write is a file write made by the worker around the benchmark.
type Write struct {
	Path  string `json:"path"`
	Value string `json:"value"`
}

// Response is a worker's answer.
type Response struct {
	Uname   string                       `json:"uname"`
	THPMode string                       `json:"thp_mode"` // /sys/kernel/mm/transparent_hugepage/enabled
	Writes  []string                     `json:"writes,omitempty"`
	Sizes   []int64                      `json:"sizes"`
	Samples [][]executor.ForkBenchSample `json:"samples"` // per size
}

// WorkerMain is `forkfuzz bench-worker`: a Request on stdin, a Response
// on stdout.
func WorkerMain(stdin io.Reader, stdout io.Writer) error {
	if err := executor.ReexecWithGODEBUG(); err != nil {
		return err
	}
	var req Request
	if err := json.NewDecoder(stdin).Decode(&req); err != nil {
		return fmt.Errorf("bench-worker: request: %w", err)
	}
	resp := Response{Uname: uname(), Sizes: req.Sizes}
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		resp.THPMode = strings.TrimSpace(string(b))
	}
	applied, undo, err := ApplyWrites(req.Writes)
	defer undo()
	if err != nil {
		return fmt.Errorf("bench-worker: %w", err)
	}
	resp.Writes = applied
	for _, sz := range req.Sizes {
		s, err := executor.ForkBench(executor.ForkBenchSpec{SizeBytes: sz, THP: req.THP, Reps: req.Reps, PinBytes: req.PinBytes})
		if err != nil {
			return fmt.Errorf("bench-worker: size %d: %w", sz, err)
		}
		resp.Samples = append(resp.Samples, s)
	}
	return json.NewEncoder(stdout).Encode(resp)
}

// ApplyWrites makes the writes (e.g. switching a fork mode on) and
// returns what it did and how to undo it; undo is never nil.
func ApplyWrites(ws []Write) (applied []string, undo func(), err error) {
	var undos []func()
	undo = func() {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
	}
	for _, w := range ws {
		old, _ := os.ReadFile(w.Path)
		if err := os.WriteFile(w.Path, []byte(w.Value), 0o644); err != nil {
			return applied, undo, fmt.Errorf("write %s: %w", w.Path, err)
		}
		got, _ := os.ReadFile(w.Path)
		applied = append(applied, fmt.Sprintf("%s=%s (was %s, reads back %s)", w.Path, w.Value, strings.TrimSpace(string(old)), strings.TrimSpace(string(got))))
		if len(old) > 0 {
			path := w.Path
			undos = append(undos, func() { os.WriteFile(path, old, 0o644) })
		}
	}
	return applied, undo, nil
}

// Uname is the running kernel's release.
func Uname() string { return uname() }

func uname() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
