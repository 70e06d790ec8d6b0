package vm

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestParseTargetFile(t *testing.T) {
	src := `# Async-fork
kernel = bzImage        # beside the file
cmdline = transparent_hugepage=madvise  nokaslr
memory = 2048
cpus=1
file = tools/busybox /bin/busybox
setup = write /proc/sys/kernel/async_fork 1
setup = run /bin/busybox sh -c "echo \"1\" > /x # not a comment"
fork-mode = write /proc/executor/use_odf 1
fork-mode = prctl 65 1
numa = 3
`
	tf, err := ParseTargetFile("/k/async.target", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := &TargetFile{
		Path: "/k/async.target", Kernel: "/k/bzImage", Cmdline: "transparent_hugepage=madvise nokaslr",
		Memory: 2048, CPUs: 1, NUMANodes: 3, Files: []File{{"/k/tools/busybox", "/bin/busybox"}},
		Setup: []Step{
			{Kind: "write", Args: []string{"/proc/sys/kernel/async_fork", "1"}, Line: 7},
			{Kind: "run", Args: []string{"/bin/busybox", "sh", "-c", `echo "1" > /x # not a comment`}, Line: 8},
		},
		ForkMode: []Step{
			{Kind: "write", Args: []string{"/proc/executor/use_odf", "1"}, Line: 9},
			{Kind: "prctl", Args: []string{"65", "1"}, Line: 10},
		},
	}
	if !reflect.DeepEqual(tf, want) {
		t.Errorf("got %+v\nwant %+v", tf, want)
	}
	if s := tf.Setup[1].String(); s != `run /bin/busybox sh -c "echo \"1\" > /x # not a comment"` {
		t.Errorf("String: %s", s)
	}
}

func TestTargetFileErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"setup = wrte /x 1", `t.target:1: field setup: unknown step "wrte"`},
		{"\n\nmemory = lots", `t.target:3: field memory: want a positive integer, got "lots"`},
		{"numa = 0", `t.target:1: field numa: want a positive integer, got "0"`},
		{"numa = 9", "t.target:1: field numa: at most 8 nodes, got 9"},
		{"setup = prctl 65 1", "t.target:1: field setup: prctl is a fork-mode step"},
		{"fork-mode = prctl 65 x", `t.target:1: field fork-mode: prctl argument "x" is not a number`},
		{"setup = write relative 1", "t.target:1: field setup: write wants an absolute PATH"},
		{"colour = red", `t.target:1: unknown key "colour"`},
		{"just words", `t.target:1: want "key = value"`},
		{`cmdline = "open`, "t.target:1: unterminated quote"},
		{"file = a b", "t.target:1: field file: want HOST-PATH /GUEST-PATH"},
		{"kernel = a b", "t.target:1: field kernel: want one value, got 2"},
	} {
		_, err := ParseTargetFile("t.target", []byte(c.src))
		var te *TargetFileError
		if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}

// ReadTargetFile refuses what is no target file at once: a FIFO (which
// would block), /dev/zero (which never ends), a directory, a huge file.
func TestReadTargetFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.target")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.target")
	if err := os.WriteFile(huge, []byte("memory = 1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, MaxTargetFile+1<<20); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.target")
	if err := os.WriteFile(good, []byte("memory = 1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo:        "fifo.target is a FIFO, want a regular file",
		"/dev/zero": "/dev/zero is a character device, want a regular file",
		dir:         "is a directory, want a regular file",
		huge:        "huge.target is 2 MiB, larger than the 1 MiB limit",
		good:        "",
	} {
		tf, err := ReadTargetFile(path)
		if want == "" {
			if err != nil || tf.Memory != 1024 {
				t.Errorf("%s: %v", path, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one saying %q", path, err, want)
		}
	}
}
