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
