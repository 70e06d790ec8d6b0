package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultImagePackage is the Debian kernel forkfuzz boots when given no
// kernel: a small cloud kernel whose virtio drivers are modules.
const DefaultImagePackage = "linux-image-cloud-amd64"

// DefaultSourcePackage is the kernel source `forkfuzz kernel build` uses
// when given no tree.
const DefaultSourcePackage = "linux-source-6.1"

// CacheDir is where forkfuzz keeps downloaded packages, unpacked kernels
// and build trees: $FORKFUZZ_CACHE, else the user's cache directory.
func CacheDir() string {
	if d := os.Getenv("FORKFUZZ_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "forkfuzz")
	}
	return filepath.Join(os.TempDir(), "forkfuzz-cache")
}

// Debian is a Debian kernel image package unpacked (not installed) in the
// cache.
type Debian struct {
	Package string // e.g. linux-image-6.1.0-57-cloud-amd64
	Dir     string // where it is unpacked
	Image   string // boot/vmlinuz-RELEASE
	Config  string // boot/config-RELEASE
	Release string // e.g. 6.1.0-57-cloud-amd64
	Modules string // lib/modules/RELEASE
}

// FetchDebian resolves pkg (a metapackage such as linux-image-cloud-amd64,
// or a versioned image package) to the image package apt would install,
// downloads it with apt-get download and unpacks it with dpkg-deb -x under
// cache, once. Nothing is installed on the host.
func FetchDebian(pkg, cache string, log io.Writer) (*Debian, error) {
	if log == nil {
		log = io.Discard
	}
	real, err := resolveMeta(pkg)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "debian", real)
	if d, err := openDebian(real, dir); err == nil {
		return d, nil
	}
	fmt.Fprintf(log, "kernel: fetching %s with apt-get download (unpacked under %s, not installed)\n", real, dir)
	if err := downloadUnpack(real, dir); err != nil {
		return nil, err
	}
	return openDebian(real, dir)
}

func openDebian(pkg, dir string) (*Debian, error) {
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return nil, fmt.Errorf("%s: want one boot/vmlinuz-* in %s, found %d", pkg, dir, len(images))
	}
	rel := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	d := &Debian{Package: pkg, Dir: dir, Image: images[0], Release: rel,
		Config:  filepath.Join(dir, "boot", "config-"+rel),
		Modules: filepath.Join(dir, "lib", "modules", rel)}
	if _, err := os.Stat(d.Modules); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg, err)
	}
	return d, nil
}

// resolveMeta follows a metapackage's "Depends: linux-image-..." to the
// real image package.
func resolveMeta(pkg string) (string, error) {
	if _, err := exec.LookPath("apt-cache"); err != nil {
		return "", fmt.Errorf("the default kernel comes from Debian's %s package, but apt-cache is not here: pass --kernel IMAGE", pkg)
	}
	out, err := exec.Command("apt-cache", "depends", "--no-recommends", "--no-suggests", pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends %s: %v: %s", pkg, err, bytes.TrimSpace(out))
	}
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if dep, ok := strings.CutPrefix(l, "Depends: "); ok && strings.HasPrefix(dep, "linux-image-") {
			return strings.Trim(dep, "<>"), nil
		}
	}
	if strings.HasPrefix(strings.TrimSpace(string(out)), pkg) {
		return pkg, nil // not a metapackage
	}
	return "", fmt.Errorf("apt-cache depends %s: no linux-image dependency in %q (run apt-get update?)", pkg, out)
}

// downloadUnpack fetches pkg's .deb into a temporary directory beside dir
// and unpacks it into dir.
func downloadUnpack(pkg, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o777) // apt-get download runs as _apt where it can
	cmd := exec.Command("apt-get", "download", "-q", pkg)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v: %s", pkg, err, lastLines(out, 5))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s: want one .deb, got %d", pkg, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], root).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %v: %s", debs[0], err, lastLines(out, 5))
	}
	os.RemoveAll(dir)
	return os.Rename(root, dir)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readFileIfExists(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return b, err
}
