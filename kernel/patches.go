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
	if log == nil {
		log = io.Discard
	}
	if _, err := exec.LookPath("patch"); err != nil {
		return errors.New("applying patches needs patch(1): apt-get install patch")
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command("patch", append([]string{"-p1", "-f", "-s", "-d", src}, args...)...)
		cmd.Stdin = bytes.NewReader(p.Text)
		return cmd.CombinedOutput()
	}
	if _, err := run("-R", "--dry-run"); err == nil {
		return ErrPatchApplied
	}
	if out, err := run("--dry-run"); err != nil {
		return fmt.Errorf("--patch %s does not apply to %s: %s", p.Path, src, lastLines(out, 5))
	}
	fmt.Fprintf(log, "kernel build: applying %s to %s\n", p.Path, src)
	if out, err := run(); err != nil {
		return fmt.Errorf("patch -p1 < %s in %s: %v: %s", p.Path, src, err, lastLines(out, 5))
	}
	return nil
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
