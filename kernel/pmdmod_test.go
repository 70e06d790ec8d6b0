package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildPMDModule builds the forkfuzz_pmd module against the prepared
// kernel tree named by FORKFUZZ_KERNEL_TREE (a `forkfuzz kernel build`
// output directory, or a source tree after `make modules_prepare`).
func TestBuildPMDModule(t *testing.T) {
	tree := os.Getenv("FORKFUZZ_KERNEL_TREE")
	if tree == "" {
		t.Skip("FORKFUZZ_KERNEL_TREE is not set: no prepared kernel tree to build the forkfuzz_pmd module against")
	}
	rel, err := os.ReadFile(filepath.Join(tree, "include/config/kernel.release"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), PMDModuleName)
	if err := BuildPMDModule(tree, dst, nil); err != nil {
		t.Fatal(err)
	}
	vm, err := ModuleVermagic(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(vm, strings.TrimSpace(string(rel))+" ") {
		t.Fatalf("vermagic %q does not name the tree's release %q", vm, rel)
	}
	t.Logf("%s: vermagic %q", dst, vm)
}

func TestBuildPMDModuleNotATree(t *testing.T) {
	err := BuildPMDModule(t.TempDir(), filepath.Join(t.TempDir(), PMDModuleName), nil)
	if err == nil || !strings.Contains(err.Error(), "modules_prepare") {
		t.Fatalf("error %v, want one that says the tree is not prepared", err)
	}
}
