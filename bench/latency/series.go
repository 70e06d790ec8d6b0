package latency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/vm"
)

// Series is one curve: a target (the host, or a VM booted with a kernel),
// a page size, and optional writes that switch a fork mode on.
type Series struct {
	Name   string
	Target string // "native" or "vm"
	Kernel string // vm
	Memory int    // vm, MiB
	// Cmdline is appended to the VM kernel's command line (vm), e.g.
	// async_fork.seq_fix=1.
	Cmdline string
	THP     bool
	// PinBytes of the measured memory are pinned (an io_uring fixed
	// buffer, FOLL_PIN) before each fork: fork copies pinned pages, and
	// the mm is marked as having pinned pages (MMF_HAS_PINNED).
	PinBytes int64
	Writes   []Write
	Spec     string // as given
}

// ParseSeries parses "NAME=TARGET[,key=value...]": TARGET native or vm;
// keys pages=4k|thp, kernel=PATH (vm), memory=MiB (vm), cmdline=WORD (vm,
// appended to the kernel command line; repeatable), write=PATH:VALUE
// (repeatable; made by the worker around the benchmark, e.g.
// write=/sys/fs/cgroup/memory.async_fork:1), pin=SIZE (that much of the
// measured memory pinned as an io_uring fixed buffer before each fork).
func ParseSeries(s string) (Series, error) {
	name, spec, ok := strings.Cut(s, "=")
	if !ok || name == "" || spec == "" {
		return Series{}, fmt.Errorf("series %q: want NAME=TARGET[,key=value...]", s)
	}
	sr := Series{Name: name, Spec: spec, Memory: 1024}
	for i, f := range strings.Split(spec, ",") {
		if i == 0 {
			if f != "native" && f != "vm" {
				return sr, fmt.Errorf("series %s: target %q: want native or vm", name, f)
			}
			sr.Target = f
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return sr, fmt.Errorf("series %s: field %q: want key=value", name, f)
		}
		switch k {
		case "pages":
			switch v {
			case "4k":
			case "thp":
				sr.THP = true
			default:
				return sr, fmt.Errorf("series %s: pages=%q: want 4k or thp", name, v)
			}
		case "kernel":
			sr.Kernel = v
		case "cmdline":
			sr.Cmdline = strings.TrimSpace(sr.Cmdline + " " + v)
		case "memory":
			n, err := strconv.Atoi(v)
			if err != nil || n < 128 {
				return sr, fmt.Errorf("series %s: memory=%q: want MiB >= 128", name, v)
			}
			sr.Memory = n
		case "pin":
			n, err := ParseSize(v)
			if err != nil || n%4096 != 0 {
				return sr, fmt.Errorf("series %s: pin=%q: want a size in whole 4 KiB pages (e.g. 64K, 2M)", name, v)
			}
			sr.PinBytes = n
		case "write":
			p, val, ok := strings.Cut(v, ":")
			if !ok || !strings.HasPrefix(p, "/") {
				return sr, fmt.Errorf("series %s: write=%q: want /PATH:VALUE", name, v)
			}
			sr.Writes = append(sr.Writes, Write{Path: p, Value: val})
		default:
			return sr, fmt.Errorf("series %s: unknown key %q (want pages, kernel, memory, cmdline, write, pin)", name, k)
		}
	}
	if sr.Target == "vm" && sr.Kernel == "" {
		return sr, fmt.Errorf("series %s: target vm needs kernel=PATH", name)
	}
	if sr.Target == "native" && (sr.Kernel != "" || sr.Cmdline != "") {
		return sr, fmt.Errorf("series %s: kernel= and cmdline= are for target vm", name)
	}
	return sr, nil
}

// ParseSize parses "4M", "1G", "512K" or a byte count.
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with K, M or G", s)
	}
	return n * mult, nil
}

// Result is one series measured.
type Result struct {
	Series Series
	Resp   Response
	Accel  string // vm: kvm or tcg
	// Err is why the series has no measurements (a kernel report in the
	// VM, for instance); the other series are still measured.
	Err error
}

// Measured returns the results that have measurements.
func Measured(res []Result) []Result {
	var out []Result
	for _, r := range res {
		if r.Err == nil {
			out = append(out, r)
		}
	}
	return out
}

// Config is one benchmark run.
type Config struct {
	Series []Series
	Sizes  []int64
	Reps   int
	// Self is the forkfuzz binary (worker on the host, agent in VMs).
	Self  string
	Accel string // vm accel: auto, kvm, tcg
	Log   io.Writer
}

// Run measures every series. VM series that share a kernel and memory
// size share one VM.
func Run(cfg Config) ([]Result, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	out := make([]Result, len(cfg.Series))
	vms := map[string]*vm.Target{}
	defer func() {
		for _, t := range vms {
			t.Close()
		}
	}()
	for i, s := range cfg.Series {
		req := Request{Sizes: cfg.Sizes, THP: s.THP, Reps: cfg.Reps, Writes: s.Writes, PinBytes: s.PinBytes}
		body, _ := json.Marshal(req)
		out[i].Series = s
		var raw []byte
		var err error
		start := time.Now()
		fmt.Fprintf(cfg.Log, "bench: series %s (%s) ...\n", s.Name, s.Spec)
		switch s.Target {
		case "native":
			raw, err = runNative(cfg.Self, body)
		case "vm":
			key := fmt.Sprintf("%s|%d|%s", s.Kernel, s.Memory, s.Cmdline)
			t := vms[key]
			if t == nil {
				fmt.Fprintf(cfg.Log, "bench: booting %s (%d MiB) %s ...\n", s.Kernel, s.Memory, s.Cmdline)
				t, err = vm.New(vm.Config{Kernel: s.Kernel, Agent: cfg.Self, Memory: s.Memory, CPUs: 2, Accel: cfg.Accel, Log: cfg.Log, Cmdline: s.Cmdline})
				if err != nil {
					return nil, fmt.Errorf("series %s: %w", s.Name, err)
				}
				vms[key] = t
			}
			out[i].Accel = t.Accel()
			raw, err = t.Bench(body, 30*time.Minute)
		}
		if err == nil {
			if err = json.Unmarshal(raw, &out[i].Resp); err != nil {
				err = fmt.Errorf("worker output: %w", err)
			} else if len(out[i].Resp.Samples) != len(cfg.Sizes) {
				err = fmt.Errorf("worker answered %d sizes of %d", len(out[i].Resp.Samples), len(cfg.Sizes))
			}
		}
		if err != nil {
			out[i].Err = err
			fmt.Fprintf(cfg.Log, "bench: series %s FAILED: %v\n", s.Name, err)
			continue
		}
		fmt.Fprintf(cfg.Log, "bench: series %s done in %v (kernel %s)\n", s.Name, time.Since(start).Round(time.Millisecond), out[i].Resp.Uname)
	}
	return out, nil
}

func runNative(self string, body []byte) ([]byte, error) {
	cmd := exec.Command(self, "bench-worker")
	cmd.Stdin = bytes.NewReader(body)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench-worker: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return out, nil
}
