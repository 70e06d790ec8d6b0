package vm

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// TargetFile describes how to run programs on one kernel under test: what
// to do in the guest before programs (sysctls, cgroup files), and how to
// switch the fork implementation under test on for every program. Users
// keep it beside their kernel. Format: one "key = value" a line, "#"
// comments, values split into words like a shell would (double quotes
// group, \" and \\ escape):
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
type TargetFileError struct {
	Path  string
	Line  int
	Field string
	Msg   string
}

func (e *TargetFileError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: field %s: %s", e.Path, e.Line, e.Field, e.Msg)
}

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
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		fail := func(field, format string, args ...any) error {
			return &TargetFileError{Path: path, Line: n, Field: field, Msg: fmt.Sprintf(format, args...)}
		}
		words, err := splitWords(line)
		if err != nil {
			return nil, fail("", "%v", err)
		}
		if len(words) == 0 {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " \t\"") {
			return nil, fail("", "want \"key = value\", got %q", strings.TrimSpace(line))
		}
		vals, err := splitWords(value)
		if err != nil {
			return nil, fail(key, "%v", err)
		}
		one := func() (string, error) {
			if len(vals) != 1 {
				return "", fail(key, "want one value, got %d", len(vals))
			}
			return vals[0], nil
		}
		switch key {
		case "kernel":
			v, err := one()
			if err != nil {
				return nil, err
			}
			tf.Kernel = abs(v)
		case "cmdline":
			tf.Cmdline = strings.TrimSpace(strings.Join(vals, " "))
		case "memory", "cpus", "numa":
			v, err := one()
			if err != nil {
				return nil, err
			}
			x, err := strconv.Atoi(v)
			if err != nil || x <= 0 {
				return nil, fail(key, "want a positive integer, got %q", v)
			}
			switch key {
			case "memory":
				tf.Memory = x
			case "cpus":
				tf.CPUs = x
			default:
				if x > maxNUMANodes {
					return nil, fail(key, "at most %d nodes, got %d", maxNUMANodes, x)
				}
				tf.NUMANodes = x
			}
		case "file":
			if len(vals) != 2 || !strings.HasPrefix(vals[1], "/") {
				return nil, fail(key, "want HOST-PATH /GUEST-PATH, got %q", strings.TrimSpace(value))
			}
			tf.Files = append(tf.Files, File{Host: abs(vals[0]), Guest: vals[1]})
		case "setup", "fork-mode":
			if len(vals) == 0 {
				return nil, fail(key, "empty step (want write PATH VALUE, run CMD ARGS..., or prctl OPTION ARGS...)")
			}
			s := Step{Kind: vals[0], Args: vals[1:], Line: n}
			switch s.Kind {
			case "write":
				if len(s.Args) != 2 || !strings.HasPrefix(s.Args[0], "/") {
					return nil, fail(key, "write wants an absolute PATH and a VALUE, got %q", strings.Join(s.Args, " "))
				}
			case "run":
				if len(s.Args) == 0 || !strings.HasPrefix(s.Args[0], "/") {
					return nil, fail(key, "run wants an absolute command path, got %q", strings.Join(s.Args, " "))
				}
			case "prctl":
				if key != "fork-mode" {
					return nil, fail(key, "prctl is a fork-mode step (it applies to the executor process)")
				}
				if len(s.Args) == 0 || len(s.Args) > 5 {
					return nil, fail(key, "prctl wants OPTION and up to four arguments")
				}
				for _, a := range s.Args {
					if _, err := strconv.ParseUint(a, 0, 64); err != nil {
						return nil, fail(key, "prctl argument %q is not a number", a)
					}
				}
			default:
				return nil, fail(key, "unknown step %q (want write, run or prctl)", s.Kind)
			}
			if key == "setup" {
				tf.Setup = append(tf.Setup, s)
			} else {
				tf.ForkMode = append(tf.ForkMode, s)
			}
		default:
			return nil, fail("", "unknown key %q (want kernel, cmdline, memory, cpus, file, setup, fork-mode)", key)
		}
	}
	return tf, nil
}

// splitWords splits s into words: whitespace separates, double quotes
// group (with \" and \\ escapes), "#" outside quotes at a word's start
// begins a comment.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			in = true
		case quoted:
			cur.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, nil
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
