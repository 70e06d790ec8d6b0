// Package testutil holds helpers shared by tests of several packages.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory of go.mod above the test's directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = up
	}
}

// AsyncForkKernel is the Async-fork kernel in ../shared/kernels beside
// the repository (or $FORKFUZZ_ASYNCFORK_KERNEL). Without it the test is
// skipped, except under CI=true, where ../shared is beside the clone and
// a missing one is a failure.
func AsyncForkKernel(t testing.TB) string {
	t.Helper()
	if k := os.Getenv("FORKFUZZ_ASYNCFORK_KERNEL"); k != "" {
		return k
	}
	k := filepath.Join(RepoRoot(t), "../shared/kernels/bzImage-6.1.192-asyncfork")
	if _, err := os.Stat(k); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Async-fork kernel is missing under CI (../shared/kernels beside the clone): %v", err)
		}
		t.Skipf("no Async-fork kernel (%v): set FORKFUZZ_ASYNCFORK_KERNEL or provide ../shared/kernels/bzImage-6.1.192-asyncfork", err)
	}
	return k
}
