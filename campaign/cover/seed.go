package cover

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrSeedBuild says a seed corpus holds no corpus of the campaign's kernel
// build: coverage (PCs, edges) does not carry across builds.
var ErrSeedBuild = errors.New("no corpus of this kernel build")

// Seed copies a kept corpus into the corpus directory of kernel build
// kernelID under workdir, so that a campaign starts from it (a nightly
// campaign's corpus, say, for a benchmark's rows) instead of from nothing.
// src is either a corpus directory (WORKDIR/corpus/ID, holding
// NAME.ffz, NAME.json and, for programs kept for their memory states,
// NAME.states) or a campaign's workdir, whose corpus/kernelID is
// taken. Programs keep their coverage, which is only meaningful for the
// same build: a src named after another build is refused with
// ErrSeedBuild. A destination that already holds programs is left as it
// is (n = 0): the campaign resumes its own corpus. It returns how many
// programs it copied.
func Seed(workdir, kernelID, src string) (n int, err error) {
	dst := filepath.Join(workdir, "corpus", kernelID)
	if have, _ := filepath.Glob(filepath.Join(dst, "*.ffz")); len(have) > 0 {
		return 0, nil
	}
	dir, err := seedDir(src, kernelID)
	if err != nil {
		return 0, err
	}
	progs, _ := filepath.Glob(filepath.Join(dir, "*.ffz"))
	if len(progs) == 0 {
		return 0, fmt.Errorf("cover: seed corpus %s: no programs (*.ffz)", dir)
	}
	sort.Strings(progs)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, fmt.Errorf("cover: %w", err)
	}
	for _, p := range progs {
		name := strings.TrimSuffix(filepath.Base(p), ".ffz")
		j := filepath.Join(dir, name+".json")
		if _, err := os.Stat(j); err != nil {
			return n, fmt.Errorf("cover: seed corpus %s: program %s has no coverage file: %w", dir, name+".ffz", err)
		}
		// The coverage first: Open reads a program only with its coverage.
		if err := copyFile(j, filepath.Join(dst, name+".json")); err != nil {
			return n, err
		}
		if st := filepath.Join(dir, name+".states"); fileExists(st) {
			if err := copyFile(st, filepath.Join(dst, name+".states")); err != nil {
				return n, err
			}
		}
		if err := copyFile(p, filepath.Join(dst, name+".ffz")); err != nil {
			return n, err
		}
		n++
	}
	if s := filepath.Join(dir, "kallsyms"); fileExists(s) {
		if err := copyFile(s, filepath.Join(dst, "kallsyms")); err != nil {
			return n, err
		}
	}
	return n, nil
}

// seedDir finds the corpus directory of build kernelID in src.
func seedDir(src, kernelID string) (string, error) {
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("cover: seed corpus: %w", err)
	}
	if sub := filepath.Join(src, "corpus", kernelID); dirExists(sub) {
		return sub, nil
	}
	if progs, _ := filepath.Glob(filepath.Join(src, "*.ffz")); len(progs) > 0 {
		if base := filepath.Base(filepath.Clean(src)); base != kernelID && looksLikeID(base) {
			return "", fmt.Errorf("cover: seed corpus %s is kernel build %s's, the campaign's kernel is %s: %w", src, base, kernelID, ErrSeedBuild)
		}
		return src, nil
	}
	var builds []string
	if es, err := os.ReadDir(filepath.Join(src, "corpus")); err == nil {
		for _, e := range es {
			if e.IsDir() {
				builds = append(builds, e.Name())
			}
		}
	}
	if len(builds) > 0 {
		return "", fmt.Errorf("cover: seed corpus %s holds corpora of kernel builds %s, not of the campaign's (%s): %w",
			src, strings.Join(builds, ", "), kernelID, ErrSeedBuild)
	}
	return "", fmt.Errorf("cover: seed corpus %s: neither a corpus directory (*.ffz) nor a workdir with corpus/%s", src, kernelID)
}

// looksLikeID: a KernelID (16 hex digits, or release-...).
func looksLikeID(s string) bool {
	if strings.HasPrefix(s, "release-") {
		return true
	}
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cover: %w", err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("cover: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("cover: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cover: %w", err)
	}
	return os.Rename(tmp, dst)
}
