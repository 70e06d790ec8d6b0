package kernel

import (
	"bytes"
	"debug/elf"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The forkfuzz_pmd module (pmdmod/): it reports a process's user PMD
// entries (present, RW, huge) in debugfs, for the rollback oracle's direct
// check that a failed or finished fork left no parent PMD write-protected.
var (
	//go:embed pmdmod/pmdflags.c
	pmdSource []byte
	//go:embed pmdmod/Kbuild
	pmdKbuild []byte
)

// PMDModuleName is the module's file name; the QEMU target loads a file of
// this name found beside the kernel image (PMDModuleFor).
const PMDModuleName = "forkfuzz_pmd.ko"

// BuildPMDModule builds the forkfuzz_pmd module against tree, a configured
// and prepared kernel build directory (one `forkfuzz kernel build` made, or
// any tree after `make modules_prepare`), and copies it to dst. The module
// loads only into a kernel built from that tree with that configuration
// (its vermagic names the release).
func BuildPMDModule(tree, dst string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	for _, f := range []string{"include/generated/utsrelease.h", "scripts/module.lds"} {
		if _, err := os.Stat(filepath.Join(tree, f)); err != nil {
			return fmt.Errorf("build %s: %s is not a prepared kernel build tree (run make modules_prepare there): %w", PMDModuleName, tree, err)
		}
	}
	dir, err := os.MkdirTemp("", "forkfuzz-pmdmod-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "pmdflags.c"), pmdSource, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "Kbuild"), pmdKbuild, 0o644); err != nil {
		return err
	}
	// A tree prepared with modules_prepare has no Module.symvers: modpost
	// then only warns about the kernel symbols the module uses, which the
	// kernel resolves by name at load time (CONFIG_MODVERSIONS off).
	args := []string{"-C", tree, "M=" + dir, "KBUILD_MODPOST_WARN=1", "modules"}
	fmt.Fprintf(log, "kernel build: make %s\n", strings.Join(args, " "))
	cmd := exec.Command("make", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(log, &out), io.MultiWriter(log, &out)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s: make %s: %w: %s", PMDModuleName, strings.Join(args, " "), err, lastLines(out.Bytes(), 10))
	}
	b, err := os.ReadFile(filepath.Join(dir, PMDModuleName))
	if err != nil {
		return fmt.Errorf("build %s: %w", PMDModuleName, err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("build %s: %w", PMDModuleName, err)
	}
	return nil
}

// PMDModuleFor returns the forkfuzz_pmd module beside a kernel image
// (where `forkfuzz kernel build` puts it), or "".
func PMDModuleFor(image string) string {
	p := filepath.Join(filepath.Dir(image), PMDModuleName)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// ModuleVermagic returns the vermagic string of a .ko file (e.g.
// "6.1.192 SMP preempt mod_unload "), which must match the kernel's for
// the module to load.
func ModuleVermagic(ko string) (string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return "", fmt.Errorf("%s: no .modinfo section", ko)
	}
	b, err := s.Data()
	if err != nil {
		return "", err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("vermagic=")); ok {
			return string(v), nil
		}
	}
	return "", fmt.Errorf("%s: no vermagic in .modinfo", ko)
}
