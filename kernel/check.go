package kernel

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// Config is a kernel configuration: option name (with CONFIG_) to value
// ("y", "m", a number or a string); options that are not set are absent.
type Config map[string]string

// ParseConfig reads a .config or a fragment.
func ParseConfig(b []byte) (Config, error) {
	c := Config{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(l, "CONFIG_") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		c[k] = v
	}
	return c, sc.Err()
}

// Size limits of the files kernel check reads: a bzImage is 10-60 MB, a
// vmlinux with debug information several hundred; a .config a few hundred
// KB.
const (
	MaxImageFile  = 512 << 20
	MaxConfigFile = 16 << 20
)

// ReadConfig reads a .config file (a regular file of at most
// MaxConfigFile bytes).
func ReadConfig(path string) (Config, error) {
	b, err := fsutil.ReadFileLimited(path, MaxConfigFile)
	if err != nil {
		return nil, err
	}
	return ParseConfig(b)
}

// On reports whether option k is built in or a module.
func (c Config) On(k string) bool { return c[k] == "y" || c[k] == "m" }

// NoConfigError says that a kernel image's configuration cannot be found.
type NoConfigError struct{ Image string }

func (e *NoConfigError) Error() string {
	return fmt.Sprintf("%s: cannot tell which oracles this kernel supports: no embedded configuration (CONFIG_IKCONFIG, gzip-compressed image) and no config file beside it (config-VERSION, .config); pass the .config", e.Image)
}

// NotImageError says that a file is neither a kernel image nor a .config.
type NotImageError struct{ Path string }

func (e *NotImageError) Error() string {
	return fmt.Sprintf("%s: not a kernel image (no bzImage header, no ELF vmlinux with a Linux version string) and not a .config", e.Path)
}

// IsImage reports whether b looks like a kernel image: an x86 boot image
// (bzImage/vmlinuz: the "HdrS" setup header magic at 0x202) or an ELF
// vmlinux (it carries a "Linux version " banner).
func IsImage(b []byte) bool {
	if len(b) > 0x206 && string(b[0x202:0x206]) == "HdrS" {
		return true
	}
	return bytes.HasPrefix(b, []byte("\x7fELF")) && bytes.Contains(b, []byte("Linux version "))
}

// FindConfig returns the configuration of a kernel given as a .config, or
// as an image: the configuration embedded with CONFIG_IKCONFIG (for
// gzip-compressed images), else a config file beside it (Debian's
// boot/config-VERSION beside vmlinuz-VERSION, config-X beside bzImage-X, or
// the build tree's .config for arch/x86/boot/bzImage). It returns where
// the configuration came from.
//
// path must be a regular file of at most MaxImageFile bytes (a FIFO or a
// device is refused, not read).
func FindConfig(path string) (Config, string, error) {
	b, err := fsutil.ReadFileLimited(path, MaxImageFile)
	if err != nil {
		return nil, "", err
	}
	if bytes.Contains(b[:min(len(b), 1<<16)], []byte("CONFIG_")) && !bytes.HasPrefix(b, []byte("\x7fELF")) && !bytes.Contains(b[:min(len(b), 4096)], []byte("HdrS")) {
		c, err := ParseConfig(b)
		return c, path, err
	}
	if !IsImage(b) {
		return nil, "", &NotImageError{Path: path}
	}
	if cfg := ikconfig(b); cfg != nil {
		c, err := ParseConfig(cfg)
		return c, path + " (embedded IKCONFIG)", err
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	var cands []string
	for _, p := range []string{"vmlinuz-", "bzImage-", "vmlinux-"} {
		if v, ok := strings.CutPrefix(base, p); ok {
			cands = append(cands, filepath.Join(dir, "config-"+v))
		}
	}
	cands = append(cands, filepath.Join(dir, ".config"), filepath.Join(dir, "../../../.config"))
	for _, c := range cands {
		b, err := fsutil.ReadFileLimited(c, MaxConfigFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, "", err // there, but a FIFO, a directory, too large
		}
		cfg, err := ParseConfig(b)
		return cfg, filepath.Clean(c), err
	}
	return nil, "", &NoConfigError{Image: path}
}

// ikconfig finds the gzip-compressed kernel inside a bzImage and the
// IKCONFIG blob (IKCFG_ST ... IKCFG_ED, itself gzip) inside that.
func ikconfig(img []byte) []byte {
	if c := ikcfgIn(img); c != nil {
		return c
	}
	for off := 0; ; {
		i := bytes.Index(img[off:], []byte{0x1f, 0x8b, 0x08})
		if i < 0 {
			return nil
		}
		off += i
		if zr, err := gzip.NewReader(bytes.NewReader(img[off:])); err == nil {
			zr.Multistream(false)
			if v, err := io.ReadAll(io.LimitReader(zr, 512<<20)); len(v) > 1<<20 || err == nil {
				if c := ikcfgIn(v); c != nil {
					return c
				}
			}
		}
		off++
	}
}

func ikcfgIn(b []byte) []byte {
	st := bytes.Index(b, []byte("IKCFG_ST"))
	if st < 0 {
		return nil
	}
	ed := bytes.Index(b[st:], []byte("IKCFG_ED"))
	if ed < 0 {
		return nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b[st+8 : st+ed]))
	if err != nil {
		return nil
	}
	// Bounded: a gzip bomb in a crafted image must not take the memory.
	v, err := io.ReadAll(io.LimitReader(zr, MaxConfigFile))
	if err != nil && len(v) == 0 {
		return nil
	}
	return v
}

// Capability is one thing forkfuzz can do with a kernel, and the options
// it needs.
type Capability struct {
	Name     string
	Needs    []string // all must be y (or m where Module is allowed)
	Required bool     // without it the kernel is no forkfuzz VM target
	Missing  []string
	Note     string
}

// CheckReport says which oracles a kernel supports.
type CheckReport struct {
	Source string
	Caps   []Capability
	// Values of options the report prints beside a capability.
	Values map[string]string
}

const asyncForkCap = "Async-fork (--fork-impl async-fork: cgroup v2 memory.async_fork)"

// HasAsyncFork reports whether the configuration has Alibaba's Async-fork.
func (r *CheckReport) HasAsyncFork() bool {
	for _, c := range r.Caps {
		if c.Name == asyncForkCap {
			return len(c.Missing) == 0
		}
	}
	return false
}

var capabilities = []Capability{
	{Name: "VM agent (initramfs, devtmpfs, serial console, virtio-serial link)", Required: true,
		Needs: []string{"CONFIG_BLK_DEV_INITRD", "CONFIG_DEVTMPFS", "CONFIG_SERIAL_8250_CONSOLE", "CONFIG_VIRTIO_PCI", "CONFIG_VIRTIO_CONSOLE", "CONFIG_PROC_FS", "CONFIG_SYSFS", "CONFIG_MEMFD_CREATE"},
		Note:  "VIRTIO_PCI/VIRTIO_CONSOLE as modules need CONFIG_MODULES and the modules beside the kernel"},
	{Name: "point-in-time, isolation, errno and mapping oracles", Required: true,
		Needs: []string{"CONFIG_MMU", "CONFIG_SHMEM"}},
	{Name: "rollback oracle: fork failure injection (fail-nth, failslab, fail_page_alloc)",
		Needs: []string{"CONFIG_FAULT_INJECTION", "CONFIG_FAILSLAB", "CONFIG_FAIL_PAGE_ALLOC", "CONFIG_FAULT_INJECTION_DEBUG_FS", "CONFIG_DEBUG_FS"}},
	{Name: "rollback oracle: memory cgroup limits", Needs: []string{"CONFIG_MEMCG"}},
	{Name: "page table inspection (PTDUMP_DEBUGFS: PMD RW bits)", Needs: []string{"CONFIG_PTDUMP_DEBUGFS", "CONFIG_DEBUG_FS"}},
	{Name: "coverage feedback (KCOV)", Needs: []string{"CONFIG_KCOV", "CONFIG_DEBUG_FS"}},
	{Name: "kernel health oracle: mm consistency checks", Needs: []string{"CONFIG_DEBUG_VM", "CONFIG_PAGE_TABLE_CHECK"}},
	{Name: "kernel health oracle: hang reports", Needs: []string{"CONFIG_DETECT_HUNG_TASK", "CONFIG_SOFTLOCKUP_DETECTOR"}},
	{Name: "memory error detection (KASAN)", Needs: []string{"CONFIG_KASAN"}},
	{Name: "THP programs (thp=on, madvise hugepage/collapse)", Needs: []string{"CONFIG_TRANSPARENT_HUGEPAGE"}},
	{Name: "userfaultfd and io_uring operations", Needs: []string{"CONFIG_USERFAULTFD", "CONFIG_IO_URING"}},
	{Name: "forced crashes for harness tests (sysrq-trigger)", Needs: []string{"CONFIG_MAGIC_SYSRQ"}},
	{Name: "forced WARNINGs and BUGs for harness tests (LKDTM)", Needs: []string{"CONFIG_LKDTM", "CONFIG_DEBUG_FS"}},
	{Name: "loadable modules (fork toggles, inspection modules)", Needs: []string{"CONFIG_MODULES"}},
	{Name: asyncForkCap, Needs: []string{"CONFIG_ASYNC_FORK", "CONFIG_MEMCG"},
		Note: "only kernels carrying Alibaba's Async-fork patch have the option; the guest reports the knob at boot"},
}

// CheckConfig evaluates a configuration.
func CheckConfig(c Config, source string) *CheckReport {
	r := &CheckReport{Source: source, Values: map[string]string{}}
	for _, n := range []string{"CONFIG_ASYNC_FORK_GUP_FIXUP"} {
		v := c[n]
		if v == "" {
			v = "n"
		}
		r.Values[n] = v
	}
	for _, cp := range capabilities {
		cp.Missing = nil
		for _, n := range cp.Needs {
			if !c.On(n) {
				cp.Missing = append(cp.Missing, n)
			}
		}
		r.Caps = append(r.Caps, cp)
	}
	return r
}

// Check finds a kernel's configuration (see FindConfig) and evaluates it.
func Check(path string) (*CheckReport, error) {
	c, src, err := FindConfig(path)
	if err != nil {
		return nil, err
	}
	return CheckConfig(c, src), nil
}

// OK reports whether every required capability is there.
func (r *CheckReport) OK() bool {
	for _, c := range r.Caps {
		if c.Required && len(c.Missing) > 0 {
			return false
		}
	}
	return true
}

func (r *CheckReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "configuration: %s\n", r.Source)
	var missing []string
	for _, c := range r.Caps {
		mark := "yes"
		if len(c.Missing) > 0 {
			mark = "NO "
			if c.Required {
				mark = "NO!"
			}
			if c.Name != asyncForkCap { // no config fragment gives a kernel Async-fork
				missing = append(missing, c.Missing...)
			}
		}
		fmt.Fprintf(&b, "  %s  %s", mark, c.Name)
		if len(c.Missing) > 0 {
			fmt.Fprintf(&b, ": missing %s", strings.Join(c.Missing, ", "))
		}
		b.WriteString("\n")
		if c.Name == asyncForkCap && len(c.Missing) == 0 {
			for _, n := range []string{"CONFIG_ASYNC_FORK_GUP_FIXUP"} {
				fmt.Fprintf(&b, "       %s=%s\n", n, r.Values[n])
			}
		}
	}
	if r.OK() {
		b.WriteString("verdict: usable as a forkfuzz VM target")
	} else {
		b.WriteString("verdict: NOT usable as a forkfuzz VM target (NO! above)")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		b.WriteString("; to get everything, build with kernel/forkfuzz.config (forkfuzz kernel build)")
	}
	b.WriteString("\n")
	return b.String()
}
