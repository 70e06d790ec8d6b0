package kernel

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Fragment is the config fragment with what forkfuzz needs, and why.
//
//go:embed forkfuzz.config
var Fragment string

// Trim switches off what a forkfuzz VM never needs.
//
//go:embed trim.config
var Trim string

// BuildOptions configure Build.
type BuildOptions struct {
	// Src is a kernel source tree ("": Debian's linux-source-6.1, fetched
	// and unpacked into CacheDir()).
	Src string
	// Out is the build directory (make O=...; default Src/forkfuzz-build).
	Out string
	// Jobs for make -j (default: the number of CPUs).
	Jobs int
	// ConfigOnly stops after writing the .config.
	ConfigOnly bool
	// Mutants applies MutantsPatch first (the kernel mutation benchmark).
	// With no Src it unpacks a tree of its own (CacheDir()/src/
	// linux-source-6.1-mutants); a given Src is patched in place. The
	// image is named bzImage-forkfuzz-mutants and the build directory
	// defaults to Src/forkfuzz-build-mutants.
	Mutants bool
	// DebugInfo builds the kernel with DWARF line tables
	// (DebugInfoConfig); the vmlinux is then kept beside the image as
	// vmlinux-forkfuzz[-mutants], for forkfuzz cover --vmlinux.
	DebugInfo bool
	// Patches are applied in order (patch -p1) before the build. With no
	// Src the build unpacks a tree of its own for this list
	// (CacheDir()/src/linux-source-6.1-pHASH); a given Src is patched in
	// place. A patch already in the tree is skipped and said.
	Patches []string
	// Config is a full kernel configuration to start from instead of
	// x86_64_defconfig + kvm_guest.config + Trim + Fragment (the mutants'
	// and debug-info fragments are still merged on top). Options of
	// Fragment it lacks are said, as for the default configuration.
	Config string
	Log    io.Writer

	patches []Patch // Patches, read by prepareSource

	skipToolCheck bool // tests with a fake tree
}

// BuildToolsMissing says which tools a kernel build needs that are not
// installed, and how to install them on Debian.
func BuildToolsMissing() error {
	var missing, pkgs []string
	for _, tool := range []struct{ bin, pkg string }{
		{"make", "make"}, {"gcc", "gcc"}, {"flex", "flex"}, {"bison", "bison"}, {"bc", "bc"}, {"perl", "perl"},
	} {
		if _, err := exec.LookPath(tool.bin); err != nil {
			missing, pkgs = append(missing, tool.bin), append(pkgs, tool.pkg)
		}
	}
	for _, h := range []struct{ file, pkg string }{
		{"/usr/include/gelf.h", "libelf-dev"}, {"/usr/include/openssl/opensslv.h", "libssl-dev"},
	} {
		if _, err := os.Stat(h.file); err != nil {
			missing, pkgs = append(missing, h.file), append(pkgs, h.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("a kernel build needs %s: apt-get install %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
}

// BuildResult says where the build put things.
type BuildResult struct {
	Config  string
	Image   string
	Elapsed time.Duration // the bzImage build (make -j), not the configuration
	Missing []string      // fragment options olddefconfig dropped (unmet dependencies)
	// Dropped are options of BuildOptions.Config that the tree did not
	// keep (unknown to it, e.g. a patch that should add them is missing,
	// or unmet dependencies), sorted.
	Dropped []string
	// PMDModule is the forkfuzz_pmd module built against the same tree,
	// beside the image; ModuleErr says why it is missing.
	PMDModule string
	ModuleErr error
	// Vmlinux is the kernel with its DWARF line tables (DebugInfo).
	Vmlinux string
}

// DebugInfoConfig gives the kernel DWARF line tables (REDUCED drops most
// type information, not lines), so KCOV PCs map to source lines. The
// guest boots with nokaslr: a PC is a vmlinux address.
const DebugInfoConfig = `# CONFIG_DEBUG_INFO_NONE is not set
CONFIG_DEBUG_INFO_DWARF5=y
CONFIG_DEBUG_INFO_REDUCED=y
`

// Build configures a small kernel for forkfuzz (x86_64_defconfig,
// kvm_guest.config, trimmed of what a VM never needs, plus Fragment) and
// builds its bzImage.
func Build(o BuildOptions) (*BuildResult, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Jobs <= 0 {
		o.Jobs = runtime.NumCPU()
	}
	if err := o.prepareSource(); err != nil {
		return nil, err
	}
	if o.Out == "" {
		o.Out = filepath.Join(o.Src, "forkfuzz-build")
		if o.Mutants {
			o.Out += "-mutants"
		}
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	b := &kbuild{o: o, out: out}
	res, err := b.configure()
	if err != nil || o.ConfigOnly {
		return res, err
	}
	if err := b.image(res); err != nil {
		return nil, err
	}
	// The PMD module, against the same tree, beside the image (pmdmod.go).
	// make bzImage leaves out what external modules link with
	// (scripts/module.lds): modules_prepare makes it.
	mod := filepath.Join(filepath.Dir(res.Image), PMDModuleName)
	err = b.make("modules_prepare")
	if err == nil {
		err = BuildPMDModule(out, mod, o.Log)
	}
	if err != nil {
		res.ModuleErr = err
		fmt.Fprintf(o.Log, "kernel build: %v (the rollback oracle falls back to its behavioural checks)\n", err)
	} else {
		res.PMDModule = mod
	}
	return res, nil
}

// prepareSource fetches the source tree unless o.Src names one, checks
// it and the build tools, and plants the mutants.
func (o *BuildOptions) prepareSource() error {
	if o.Src == "" && o.Mutants {
		src, err := fetchSourceTo(CacheDir(), mutantsTree(CacheDir()), o.Log)
		if err != nil {
			return err
		}
		o.Src = src
	}
	if len(o.Patches) > 0 {
		ps, err := ReadPatches(o.Patches)
		if err != nil {
			return err
		}
		o.patches = ps
		if o.Src == "" {
			src, err := fetchSourceTo(CacheDir(), patchedTree(CacheDir(), ps), o.Log)
			if err != nil {
				return err
			}
			o.Src = src
		}
	}
	if o.Src == "" {
		src, err := FetchSource(CacheDir(), o.Log)
		if err != nil {
			return err
		}
		o.Src = src
	}
	if _, err := os.Stat(filepath.Join(o.Src, "Makefile")); err != nil {
		return fmt.Errorf("%s is not a kernel source tree: %w", o.Src, err)
	}
	if err := BuildToolsMissing(); err != nil && !o.skipToolCheck {
		return err
	}
	if err := applyPatches(o.Src, o.patches, o.Log); err != nil {
		return err
	}
	if o.Mutants {
		if err := ApplyMutants(o.Src, o.Log); errors.Is(err, ErrMutantsApplied) {
			fmt.Fprintf(o.Log, "kernel build: %s already has the mutants patch\n", o.Src)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// kbuild is a build of tree o.Src in directory out.
type kbuild struct {
	o   BuildOptions
	out string
}

// make runs make in the build directory.
func (b *kbuild) make(args ...string) error {
	args = append([]string{"-C", b.o.Src, "O=" + b.out}, args...)
	fmt.Fprintf(b.o.Log, "kernel build: make %s\n", strings.Join(args, " "))
	cmd := exec.Command("make", args...)
	cmd.Stdout, cmd.Stderr = b.o.Log, b.o.Log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// configure writes the .config and says which options of Fragment the
// tree could not enable.
func (b *kbuild) configure() (*BuildResult, error) {
	o, out := b.o, b.out
	fragText := Trim + "\n" + Fragment
	if o.Config != "" {
		if err := startConfig(o.Config, out); err != nil {
			return nil, err
		}
		fragText = ""
	} else {
		for _, t := range []string{"x86_64_defconfig", "kvm_guest.config"} {
			if err := b.make(t); err != nil {
				return nil, err
			}
		}
	}
	frag := filepath.Join(out, "forkfuzz.config")
	if o.Mutants {
		fragText += "\n" + MutantsConfig
	}
	if o.DebugInfo {
		fragText += "\n" + DebugInfoConfig
	}
	if err := os.WriteFile(frag, []byte(fragText), 0o644); err != nil {
		return nil, err
	}
	merge := exec.Command(filepath.Join(o.Src, "scripts/kconfig/merge_config.sh"), "-m", "-O", out, filepath.Join(out, ".config"), frag)
	merge.Dir = o.Src
	merge.Stdout, merge.Stderr = o.Log, o.Log
	if err := merge.Run(); err != nil {
		return nil, fmt.Errorf("merge_config.sh: %w", err)
	}
	if err := b.make("olddefconfig"); err != nil {
		return nil, err
	}
	res := &BuildResult{Config: filepath.Join(out, ".config")}
	cfg, err := ReadConfig(res.Config)
	if err != nil {
		return nil, err
	}
	wantText := Fragment
	if o.DebugInfo {
		wantText += "\n" + DebugInfoConfig
	}
	want, _ := ParseConfig([]byte(wantText))
	for k, v := range want {
		if cfg[k] != v {
			res.Missing = append(res.Missing, k)
		}
	}
	sort.Strings(res.Missing)
	if len(res.Missing) > 0 && o.Config != "" {
		fmt.Fprintf(o.Log, "kernel build: --config %s lacks %s (forkfuzz's oracles use them: see forkfuzz kernel check)\n", o.Config, strings.Join(res.Missing, ", "))
	} else if len(res.Missing) > 0 {
		fmt.Fprintf(o.Log, "kernel build: this tree cannot enable %s (unmet dependencies or unknown options)\n", strings.Join(res.Missing, ", "))
	}
	if o.Config != "" {
		given, err := ReadConfig(o.Config)
		if err != nil {
			return nil, err
		}
		res.Dropped = droppedOptions(given, cfg)
		if len(res.Dropped) > 0 {
			fmt.Fprintf(o.Log, "kernel build: this tree did not keep %s of --config %s (unknown options or unmet dependencies; a missing --patch?)\n", strings.Join(res.Dropped, ", "), o.Config)
		}
	}
	return res, nil
}

// droppedOptions lists the options set in given that got lost or changed
// in the configuration the build ended with.
func droppedOptions(given, got Config) []string {
	var out []string
	for k, v := range given {
		if got[k] != v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// image builds the bzImage (and keeps the vmlinux with debug info).
func (b *kbuild) image(res *BuildResult) error {
	o, out := b.o, b.out
	start := time.Now()
	if err := b.make(fmt.Sprintf("-j%d", o.Jobs), "bzImage"); err != nil {
		return err
	}
	res.Elapsed = time.Since(start)
	res.Image = filepath.Join(out, "arch/x86/boot/bzImage")
	if o.Mutants {
		named := filepath.Join(out, "bzImage-forkfuzz-mutants")
		if err := copyFile(res.Image, named); err != nil {
			return err
		}
		res.Image = named
	}
	fmt.Fprintf(o.Log, "kernel build: %s in %v\n", res.Image, res.Elapsed.Round(time.Second))
	if o.DebugInfo {
		named := filepath.Join(filepath.Dir(res.Image), "vmlinux-forkfuzz")
		if o.Mutants {
			named += "-mutants"
		}
		if err := copyFile(filepath.Join(out, "vmlinux"), named); err != nil {
			return err
		}
		res.Vmlinux = named
	}
	return nil
}

// FetchSource downloads Debian's kernel source package with apt-get
// download, unpacks it (not installed) and its tarball into cache, once,
// and returns the tree.
func FetchSource(cache string, log io.Writer) (string, error) {
	return fetchSourceTo(cache, filepath.Join(cache, "src", DefaultSourcePackage), log)
}

// fetchSourceTo is FetchSource unpacking into tree (a directory under
// cache/src).
func fetchSourceTo(cache, tree string, log io.Writer) (string, error) {
	pkgDir := filepath.Join(cache, "debian", DefaultSourcePackage)
	if _, err := os.Stat(filepath.Join(tree, "Makefile")); err == nil {
		return tree, nil
	}
	if _, err := os.Stat(pkgDir); err != nil {
		if _, err := exec.LookPath("apt-get"); err != nil {
			return "", errors.New("no --src given and apt-get is not here to fetch " + DefaultSourcePackage)
		}
		fmt.Fprintf(log, "kernel build: fetching %s with apt-get download\n", DefaultSourcePackage)
		if err := downloadUnpack(DefaultSourcePackage, pkgDir); err != nil {
			return "", err
		}
	}
	tars, _ := filepath.Glob(filepath.Join(pkgDir, "usr/src/linux-source-*.tar.*"))
	if len(tars) != 1 {
		return "", fmt.Errorf("%s: want one usr/src/linux-source-*.tar.* , found %d", pkgDir, len(tars))
	}
	// Unpack beside the tree and rename, so a tree of another name (the
	// mutants' copy) never lands on the plain one.
	if err := os.MkdirAll(filepath.Dir(tree), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(tree), ".unpack-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(log, "kernel build: unpacking %s into %s\n", tars[0], tree)
	if out, err := exec.Command("tar", "-xf", tars[0], "-C", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar -xf %s: %v: %s", tars[0], err, lastLines(out, 5))
	}
	base := strings.SplitN(filepath.Base(tars[0]), ".tar", 2)[0]
	os.RemoveAll(tree) // a tree without its Makefile: an unpack that was cut short
	if err := os.Rename(filepath.Join(tmp, base), tree); err != nil {
		return "", err
	}
	return tree, nil
}
