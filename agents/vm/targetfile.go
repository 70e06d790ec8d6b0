package vm

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/kvfile"
)

// TargetFile describes how to run programs on one kernel under test: what
// to do in the guest before programs (sysctls, cgroup files), and how to
// switch the fork implementation under test on for every program. Users
// keep it beside their kernel. Format: one "key = value" a line, "#"
// comments, values split into words like a shell would (double quotes
// group, \" and \\ escape; the grammar is internal/kvfile's):
//
//	# Async-fork on a vendor kernel
//	kernel = bzImage-async-fork              # default --kernel, relative to this file
//	cmdline = transparent_hugepage=madvise    # appended to the kernel command line
//	memory = 2048                             # MiB per VM
//	cpus = 2                                  # vCPUs per VM
//	numa = 2                                  # NUMA nodes per VM (1: none)
//	file = tools/busybox /bin/busybox         # copy a host file into the guest
//	setup = write /proc/sys/kernel/async_fork 1
//	setup = run /bin/busybox sh -c "echo 1 > /sys/fs/cgroup/x"
//	fork-mode = write /proc/executor/use_odf 1   # before every program
//	fork-mode = prctl 65 1                       # in the executor process
//
// Steps: "write PATH VALUE" writes VALUE to PATH ("/proc/executor/" is the
// /proc directory of the executor process that runs the programs); "run
// CMD ARGS..." runs a guest command and fails the step on non-zero exit;
// "prctl OPTION [ARG2 ...]" (fork-mode only) is made by the executor
// process itself when it starts, before it runs any program.
type TargetFile struct {
	Path    string
	Kernel  string // absolute, or ""
	Cmdline string
	Memory  int
	CPUs    int
	// NUMANodes per VM (0: the default, see Config.NUMANodes).
	NUMANodes int
	Files     []File
	Setup     []Step
	ForkMode  []Step
}

// File is a host file copied into the guest's initramfs.
type File struct {
	Host, Guest string
}

// Step is one guest set-up or fork-mode step.
type Step struct {
	Kind string   `json:"kind"` // write, run, prctl
	Args []string `json:"args"`
	Line int      `json:"line,omitempty"`
}

func (s Step) String() string {
	var b strings.Builder
	b.WriteString(s.Kind)
	for _, a := range s.Args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\"\\#") {
			a = strconv.Quote(a)
		}
		b.WriteString(a)
	}
	return b.String()
}

// TargetFileError names the file, line and field at fault.
type TargetFileError = kvfile.Error

// MaxTargetFile bounds a target file (a few dozen lines in practice).
const MaxTargetFile = 1 << 20

// ReadTargetFile reads and parses a target file: a regular file of at
// most MaxTargetFile bytes (a FIFO, device or directory is refused).
func ReadTargetFile(path string) (*TargetFile, error) {
	b, err := fsutil.ReadFileLimited(path, MaxTargetFile)
	if err != nil {
		return nil, err // names path
	}
	return ParseTargetFile(path, b)
}

// ParseTargetFile parses a target file's content; relative host paths are
// taken relative to path's directory.
func ParseTargetFile(path string, b []byte) (*TargetFile, error) {
	tf := &TargetFile{Path: path}
	if err := kvfile.Each(path, b, tf.set); err != nil {
		return nil, err
	}
	return tf, nil
}

// set applies one line of the file.
func (tf *TargetFile) set(l kvfile.Line) error {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(tf.Path), p)
	}
	key, vals := l.Key, l.Words
	one := func() (string, error) {
		if len(vals) != 1 {
			return "", l.Errorf("want one value, got %d", len(vals))
		}
		return vals[0], nil
	}
	switch key {
	case "kernel":
		v, err := one()
		if err != nil {
			return err
		}
		tf.Kernel = abs(v)
	case "cmdline":
		tf.Cmdline = strings.TrimSpace(strings.Join(vals, " "))
	case "memory", "cpus", "numa":
		v, err := one()
		if err != nil {
			return err
		}
		x, err := strconv.Atoi(v)
		if err != nil || x <= 0 {
			return l.Errorf("want a positive integer, got %q", v)
		}
		switch key {
		case "memory":
			tf.Memory = x
		case "cpus":
			tf.CPUs = x
		default:
			if x > maxNUMANodes {
				return l.Errorf("at most %d nodes, got %d", maxNUMANodes, x)
			}
			tf.NUMANodes = x
		}
	case "file":
		if len(vals) != 2 || !strings.HasPrefix(vals[1], "/") {
			return l.Errorf("want HOST-PATH /GUEST-PATH, got %q", l.Value)
		}
		tf.Files = append(tf.Files, File{Host: abs(vals[0]), Guest: vals[1]})
	case "setup", "fork-mode":
		s, err := step(l)
		if err != nil {
			return err
		}
		if key == "setup" {
			tf.Setup = append(tf.Setup, s)
		} else {
			tf.ForkMode = append(tf.ForkMode, s)
		}
	default:
		return &TargetFileError{Path: l.Path, Line: l.N, Msg: fmt.Sprintf("unknown key %q (want kernel, cmdline, memory, cpus, file, setup, fork-mode)", key)}
	}
	return nil
}

// step checks a setup or fork-mode line's step.
func step(l kvfile.Line) (Step, error) {
	if len(l.Words) == 0 {
		return Step{}, l.Errorf("empty step (want write PATH VALUE, run CMD ARGS..., or prctl OPTION ARGS...)")
	}
	s := Step{Kind: l.Words[0], Args: l.Words[1:], Line: l.N}
	switch s.Kind {
	case "write":
		if len(s.Args) != 2 || !strings.HasPrefix(s.Args[0], "/") {
			return s, l.Errorf("write wants an absolute PATH and a VALUE, got %q", strings.Join(s.Args, " "))
		}
	case "run":
		if len(s.Args) == 0 || !strings.HasPrefix(s.Args[0], "/") {
			return s, l.Errorf("run wants an absolute command path, got %q", strings.Join(s.Args, " "))
		}
	case "prctl":
		if l.Key != "fork-mode" {
			return s, l.Errorf("prctl is a fork-mode step (it applies to the executor process)")
		}
		if len(s.Args) == 0 || len(s.Args) > 5 {
			return s, l.Errorf("prctl wants OPTION and up to four arguments")
		}
		for _, a := range s.Args {
			if _, err := strconv.ParseUint(a, 0, 64); err != nil {
				return s, l.Errorf("prctl argument %q is not a number", a)
			}
		}
	default:
		return s, l.Errorf("unknown step %q (want write, run or prctl)", s.Kind)
	}
	return s, nil
}
