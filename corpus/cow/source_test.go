package cow

import (
	"os"
	"path/filepath"
	"testing"
)

// cowCache is where .ci/deps unpacks linux-source-6.12's mm selftests
// and liburing-dev (apt-get download, never installed).
func cowCache() string {
	if d := os.Getenv("FORKFUZZ_COW_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "forkfuzz", "cow")
}

// cowSource returns the directory of cow.c (tools/testing/selftests/mm
// of a 6.12 tree: FORKFUZZ_COW_SRC names the tree) or skips.
func cowSource(t *testing.T) string {
	t.Helper()
	tree := os.Getenv("FORKFUZZ_COW_SRC")
	if tree == "" {
		tree = filepath.Join(cowCache(), "linux-source-6.12")
	}
	dir := filepath.Join(tree, "tools/testing/selftests/mm")
	if _, err := os.Stat(filepath.Join(dir, "cow.c")); err != nil {
		t.Skipf("no cow.c in %s (set FORKFUZZ_COW_SRC to a Linux 6.12 tree, or run .ci/deps, which unpacks Debian's linux-source-6.12 there): %v", dir, err)
	}
	return dir
}
