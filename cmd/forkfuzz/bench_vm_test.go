package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// TestBenchForkInVM runs the fork benchmark in a QEMU VM booted with the
// reference kernel, beside the host, through a static forkfuzz binary
// (the guest agent), and checks both series are in the table and the plot.
func TestBenchForkInVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no qemu-system-x86_64")
	}
	root := testutil.RepoRoot(t)
	kernel := os.Getenv("FORKFUZZ_TEST_KERNEL")
	if kernel == "" {
		kernel = filepath.Join(root, "../shared/kernels/bzImage-6.1.192-forkfuzz")
	}
	if _, err := os.Stat(kernel); err != nil {
		t.Skipf("no reference kernel (%v): set FORKFUZZ_TEST_KERNEL or provide ../shared/kernels beside the repository", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "forkfuzz")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	svg := filepath.Join(dir, "b.svg")
	cmd := exec.Command(bin, "bench", "fork", "--sizes", "2M,8M", "--reps", "1", "--svg", svg,
		"--series", "host=native", "--series", "vm=vm,kernel="+kernel+",memory=512")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "# vm: vm, kernel 6.1") || !strings.Contains(s, "      vm         8") {
		t.Errorf("no VM series in the output:\n%s", s)
	}
	if b, _ := os.ReadFile(svg); strings.Count(string(b), "<polyline") != 2+2+1 {
		t.Errorf("the plot lacks a curve")
	}
}
