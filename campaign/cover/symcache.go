package cover

import (
	"os"
	"path/filepath"

	"github.com/forkfuzz/forkfuzz/kernel"
)

// The text symbols of a kernel image are kept across workdirs, under
// kernel.CacheDir()/kallsyms/ID: the guest reads /proc/kallsyms for them,
// which takes seconds under TCG, and a campaign asked for them on its
// first program, before anything else ran. An image's symbols are fixed by
// its bytes (the VMs boot with nokaslr), so ID is the image's KernelID; a
// kernel named by its release only (the host's, a sim's) is not cached,
// since many builds share a release.

// imageID reports whether id names an image by its contents: KernelID's
// 16 hex digits of the image's sha256.
func imageID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// symbolsCachePath is where the symbols of the image kernelID are kept
// ("": not an image's ID, not cached).
func symbolsCachePath(kernelID string) string {
	if !imageID(kernelID) {
		return ""
	}
	return filepath.Join(kernel.CacheDir(), "kallsyms", kernelID)
}

// HaveSymbols reports whether the symbols of kernelID are at hand without
// asking the target: beside the corpus under workdir, or in the cache.
func HaveSymbols(workdir, kernelID string) bool {
	if _, err := os.Stat(filepath.Join(workdir, "corpus", kernelID, "kallsyms")); err == nil {
		return true
	}
	p := symbolsCachePath(kernelID)
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// cacheSymbols keeps text as the symbols of kernelID in the cache, written
// whole or not at all (a temporary file renamed). The cache only spares a
// later campaign the guest's read, so a failure is reported to the caller
// to log, not an error of the campaign.
func cacheSymbols(kernelID, text string) error {
	p := symbolsCachePath(kernelID)
	if p == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), kernelID+".*.tmp")
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// cachedSymbols reads the cached symbols of kernelID ("" and no error
// when there are none).
func cachedSymbols(kernelID string) (string, error) {
	p := symbolsCachePath(kernelID)
	if p == "" {
		return "", nil
	}
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}
