package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/kernel"
)

// KernelIdentity says which kernel a gate ran against.
type KernelIdentity struct {
	// Target is the target's name ("qemu", "native", "sim-async+MUTANT").
	Target string `json:"target"`
	// Image and SHA256 identify a bzImage (qemu targets).
	Image  string `json:"image,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Release is the kernel release: from the bzImage header for an
	// image, uname -r for native, the target name for the simulated kernel.
	Release string `json:"release"`
	// Version is the full version banner where known (bzImage header,
	// uname -v).
	Version string `json:"version,omitempty"`
	// Config and ConfigSHA256 name the configuration kernel check read.
	Config       string `json:"config,omitempty"`
	ConfigSHA256 string `json:"config_sha256,omitempty"`
	// Flags are the target flags (what `forkfuzz exec` needs to run a
	// program on this kernel again).
	Flags []string `json:"flags,omitempty"`
}

// IdentifyImage fills the identity of a kernel image: its sha256 and the
// release and banner from the bzImage header.
func IdentifyImage(path string) (KernelIdentity, error) {
	id := KernelIdentity{Image: path}
	f, err := os.Open(path)
	if err != nil {
		return id, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return id, fmt.Errorf("%s: %w", path, err)
	}
	id.SHA256 = hex.EncodeToString(h.Sum(nil))
	hdr := make([]byte, 0x10000)
	n, _ := f.ReadAt(hdr, 0)
	hdr = hdr[:n]
	if v := BzImageVersion(hdr); v != "" {
		id.Version = v
		id.Release, _, _ = strings.Cut(v, " ")
	}
	if _, src, err := kernel.FindConfig(path); err == nil {
		id.Config = src
		cp := strings.TrimSuffix(src, " (embedded IKCONFIG)")
		if b, err := os.ReadFile(cp); err == nil && cp != path {
			s := sha256.Sum256(b)
			id.ConfigSHA256 = hex.EncodeToString(s[:])
		}
	}
	return id, nil
}

// BzImageVersion returns the kernel version string of an x86 bzImage
// header (boot protocol: "HdrS" at 0x202, kernel_version pointer at
// 0x20e, relative to 0x200), or "" if hdr is no bzImage.
func BzImageVersion(hdr []byte) string {
	if len(hdr) < 0x210 || string(hdr[0x202:0x206]) != "HdrS" {
		return ""
	}
	off := int(binary.LittleEndian.Uint16(hdr[0x20e:])) + 0x200
	if off <= 0x200 || off >= len(hdr) {
		return ""
	}
	s := hdr[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if len(s) > 256 {
		s = s[:256]
	}
	return strings.TrimSpace(string(s))
}

// HostIdentity is the identity of the host kernel (native target).
func HostIdentity() KernelIdentity {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return KernelIdentity{Target: "native", Release: "unknown"}
	}
	return KernelIdentity{Target: "native", Release: unix.ByteSliceToString(u.Release[:]), Version: unix.ByteSliceToString(u.Version[:])}
}
