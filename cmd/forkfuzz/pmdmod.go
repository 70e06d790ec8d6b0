package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/kernel"
)

// cmdKernelModule is `forkfuzz kernel module`: build the forkfuzz_pmd
// module against a prepared kernel tree (`forkfuzz kernel build` builds it
// by itself; this is for trees prepared otherwise).
func cmdKernelModule(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("kernel module", stderr)
	tree := fs.String("tree", "", "prepared kernel build tree (after make modules_prepare, or forkfuzz kernel build's --out)")
	out := fs.String("out", kernel.PMDModuleName, "where to write the module")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	if *tree == "" {
		fmt.Fprintln(stderr, "forkfuzz kernel module: --tree is required")
		return exitError
	}
	if err := kernel.BuildPMDModule(*tree, *out, stderr); err != nil {
		fmt.Fprintln(stderr, "forkfuzz kernel module:", err)
		return exitError
	}
	vm, err := kernel.ModuleVermagic(*out)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz kernel module:", err)
		return exitError
	}
	fmt.Fprintf(stdout, "module: %s (vermagic %q; put it beside the kernel image or pass --modules)\n", *out, vm)
	return exitClean
}

// extraModules returns the modules named by --modules, or, when none are
// named, the forkfuzz_pmd module beside the kernel image if there is one.
func extraModules(flag, image string) []string {
	var mods []string
	for _, m := range strings.Split(flag, ",") {
		if m = strings.TrimSpace(m); m != "" {
			if abs, err := filepath.Abs(m); err == nil {
				m = abs
			}
			mods = append(mods, m)
		}
	}
	if len(mods) == 0 && image != "" {
		if m := kernel.PMDModuleFor(image); m != "" {
			fmt.Fprintf(os.Stderr, "qemu: loading %s in the guest (found beside the kernel image)\n", m)
			mods = append(mods, m)
		}
	}
	return mods
}
