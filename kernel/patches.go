package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// maxPatchSize bounds a patch file read by ReadPatches.
const maxPatchSize = 64 << 20

// Patch is one patch file given to a build, read once.
type Patch struct {
	Path string
	Text []byte
}

// ReadPatches reads the patch files in the order given. A file that is
// not a regular file, is empty or does not look like a unified diff is
// an error naming it.
func ReadPatches(paths []string) ([]Patch, error) {
	var out []Patch
	for _, p := range paths {
		b, err := fsutil.ReadFileLimited(p, maxPatchSize)
		if err != nil {
			return nil, fmt.Errorf("--patch %s: %w", p, err)
		}
		if !looksLikeDiff(b) {
			return nil, fmt.Errorf("--patch %s: not a unified diff (no \"--- \"/\"+++ \" file headers)", p)
		}
		out = append(out, Patch{Path: p, Text: b})
	}
	return out, nil
}

// looksLikeDiff says whether b has a unified diff's file headers: a
// "--- " line followed by a "+++ " line.
func looksLikeDiff(b []byte) bool {
	lines := bytes.Split(b, []byte("\n"))
	for i := 0; i+1 < len(lines); i++ {
		if bytes.HasPrefix(lines[i], []byte("--- ")) && bytes.HasPrefix(lines[i+1], []byte("+++ ")) {
			return true
		}
	}
	return false
}

// patchesID names a list of patches by the hash of their texts in order.
func patchesID(patches []Patch) string {
	h := sha256.New()
	for _, p := range patches {
		fmt.Fprintf(h, "%d\n", len(p.Text))
		h.Write(p.Text)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// patchedTree is where a default build with patches unpacks its own copy
// of the source (one per list of patches), so patches never reach the
// tree plain builds use.
func patchedTree(cache string, patches []Patch) string {
	return filepath.Join(cache, "src", DefaultSourcePackage+"-p"+patchesID(patches))
}

// ErrPatchApplied says ApplyPatch found the patch already in the tree.
var ErrPatchApplied = errors.New("the patch is already applied")

// ApplyPatch applies one patch to the kernel tree src with patch -p1. A
// tree that already has it is left alone (ErrPatchApplied); a tree it
// does not apply to is an error that names the patch and the hunks that
// failed.
func ApplyPatch(src string, p Patch, log io.Writer) error {
	return applyDiff(src, p.Text, "--patch "+p.Path, "applying "+p.Path+" to "+src, log)
}

// applyDiff applies a unified diff to src with patch -p1; what names it
// in errors, say is logged when it applies.
func applyDiff(src string, text []byte, what, say string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if _, err := exec.LookPath("patch"); err != nil {
		return errors.New("applying " + what + " needs patch(1): apt-get install patch")
	}
	run := func(args ...string) ([]byte, error) { return runPatch(src, text, args...) }
	if _, err := run("-R", "--dry-run"); err == nil {
		return ErrPatchApplied
	}
	if out, err := run("--dry-run"); err != nil {
		return fmt.Errorf("%s does not apply to %s: %s", what, src, lastLines(out, 5))
	}
	fmt.Fprintf(log, "kernel build: %s\n", say)
	if out, err := run(); err != nil {
		return fmt.Errorf("patch -p1 < %s in %s: %v: %s", what, src, err, lastLines(out, 5))
	}
	return nil
}

// reverseDiff takes the patch text out of src (patch -R), checking with a
// dry run first so that a failure leaves src as it was.
func reverseDiff(src string, text []byte) error {
	if _, err := exec.LookPath("patch"); err != nil {
		return errors.New("reversing a patch needs patch(1): apt-get install patch")
	}
	for _, args := range [][]string{{"-R", "--dry-run"}, {"-R"}} {
		if out, err := runPatch(src, text, args...); err != nil {
			return fmt.Errorf("patch -R: %v: %s", err, lastLines(out, 5))
		}
	}
	return nil
}

// runPatch runs patch -p1 in src with text on its standard input.
func runPatch(src string, text []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("patch", append([]string{"-p1", "-f", "-s", "-d", src}, args...)...)
	cmd.Stdin = bytes.NewReader(text)
	return cmd.CombinedOutput()
}

// applyPatches applies patches in order, saying which were there already.
func applyPatches(src string, patches []Patch, log io.Writer) error {
	for _, p := range patches {
		err := ApplyPatch(src, p, log)
		if errors.Is(err, ErrPatchApplied) {
			fmt.Fprintf(log, "kernel build: %s already has %s\n", src, p.Path)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// startConfig puts the given full configuration in place as out/.config.
func startConfig(config, out string) error {
	b, err := fsutil.ReadFileLimited(config, 16<<20)
	if err != nil {
		return fmt.Errorf("--config %s: %w", config, err)
	}
	if _, err := ParseConfig(b); err != nil {
		return fmt.Errorf("--config %s: %w", config, err)
	}
	return os.WriteFile(filepath.Join(out, ".config"), b, 0o644)
}

// PatchedBuildDir is the build directory `forkfuzz kernel build --patch
// P1 --patch P2 ...` uses without --src and --out: that of the tree
// unpacked for this series (the image is arch/x86/boot/bzImage in it).
func PatchedBuildDir(patches []string) (string, error) {
	ps, err := ReadPatches(patches)
	if err != nil {
		return "", err
	}
	return filepath.Join(patchedTree(CacheDir(), ps), "forkfuzz-build"), nil
}

// AsyncForkFixSeries is the patch series of the fixed Async-fork kernel
// of docs/asyncfork/report.md, relative to the repository root: the 6.1
// port in ../shared/kernels, then kernel/patches/async-fork/*.patch.
func AsyncForkFixSeries(root string) []string {
	fixes, _ := filepath.Glob(filepath.Join(root, "kernel/patches/async-fork/*.patch"))
	return append([]string{filepath.Join(root, "../shared/kernels/async-fork-6.1.192.patch")}, fixes...)
}

// AsyncForkFixedImage is the fixed Async-fork kernel's image:
// $FORKFUZZ_ASYNCFORK_FIXED_KERNEL, else where `forkfuzz kernel build
// --patch ...` of AsyncForkFixSeries leaves it. The error says how to
// build it.
func AsyncForkFixedImage(root string) (string, error) {
	if k := os.Getenv("FORKFUZZ_ASYNCFORK_FIXED_KERNEL"); k != "" {
		if _, err := os.Stat(k); err != nil {
			return "", fmt.Errorf("FORKFUZZ_ASYNCFORK_FIXED_KERNEL: %w", err)
		}
		return k, nil
	}
	series := AsyncForkFixSeries(root)
	dir, err := PatchedBuildDir(series)
	if err != nil {
		return "", err
	}
	img := filepath.Join(dir, "arch/x86/boot/bzImage")
	if _, err := os.Stat(img); err != nil {
		return "", fmt.Errorf("%w: build it with forkfuzz kernel build --config ../shared/kernels/config-6.1.192-asyncfork --patch %s, or set FORKFUZZ_ASYNCFORK_FIXED_KERNEL", err, strings.Join(series, " --patch "))
	}
	return img, nil
}
