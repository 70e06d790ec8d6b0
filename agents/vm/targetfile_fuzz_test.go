package vm

import (
	"errors"
	"testing"
)

// FuzzParseTargetFile checks that any target file either parses or fails
// with a *TargetFileError naming the line, and never panics.
func FuzzParseTargetFile(f *testing.F) {
	f.Add([]byte("kernel = bzImage\nsetup = write /proc/sys/kernel/async_fork 1\nfork-mode = prctl 65 1\n"))
	f.Add([]byte("cmdline = \"a b\" c # comment\nmemory = 2048\ncpus = 2\nfile = x /y\n"))
	f.Add([]byte("setup = run /bin/sh -c \"echo \\\"1\\\"\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tf, err := ParseTargetFile("f.target", b)
		if err != nil {
			var te *TargetFileError
			if !errors.As(err, &te) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if tf == nil {
			t.Fatal("nil target file without an error")
		}
	})
}
