package campaign

import (
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// KernelID names the kernel a finding was seen on.
type KernelID struct {
	// Image is the path of the booted kernel image (qemu), SHA256 its hash.
	Image  string `json:"image,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Uname is `uname -r -v` of the kernel: the host's (native) or the
	// guest's as the VM agent reported it at boot (qemu).
	Uname string `json:"uname,omitempty"`
	// Observed is the release the executor saw while running the program
	// (obs.Observation.Kernel), when it reported one.
	Observed string `json:"observed,omitempty"`
	// Simulated names the simulated kernel (sim target) instead.
	Simulated string `json:"simulated,omitempty"`
}

// String is one line naming the kernel.
func (k KernelID) String() string {
	var parts []string
	if k.Simulated != "" {
		parts = append(parts, "simulated kernel "+k.Simulated)
	}
	if k.Image != "" {
		parts = append(parts, "image "+k.Image)
	}
	if k.SHA256 != "" {
		parts = append(parts, "sha256 "+k.SHA256)
	}
	if k.Uname != "" {
		parts = append(parts, "uname "+k.Uname)
	}
	if k.Observed != "" && !strings.Contains(k.Uname, k.Observed) {
		parts = append(parts, "observed release "+k.Observed)
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// HostKernel is the host kernel's `uname -r -v`.
func HostKernel() KernelID {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return KernelID{}
	}
	return KernelID{Uname: unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])}
}

// ReplayCommand is the shell command that runs program file prog on the
// target the way the campaign ran it: `forkfuzz exec` with the target's
// flags (targetArgs, e.g. --target sim --fork async --sched-seed 7) and the
// test-only corruption, if any.
func ReplayCommand(targetArgs []string, corrupt, prog string) string {
	args := append([]string{"forkfuzz", "exec"}, targetArgs...)
	if corrupt != "" {
		args = append(args, "--corrupt", corrupt)
	}
	args = append(args, prog)
	for i, a := range args {
		args[i] = ShellQuote(a)
	}
	return strings.Join(args, " ")
}

// ShellQuote quotes s for a POSIX shell when it needs quoting.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SplitCommand undoes ReplayCommand's quoting: it splits a command line
// into words, honouring single quotes (and nothing else).
func SplitCommand(s string) []string {
	var words []string
	var cur strings.Builder
	in, inWord := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			in, inWord = !in, true
		case !in && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case !in && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Replay is the command that reproduces f: its minimized program if it has
// one, else the program as found (run in the finding's directory).
func (f *Finding) Replay() string {
	file := "program.ffz"
	if f.Minimized != nil {
		file = "minimized.ffz"
	}
	args := f.TargetArgs
	if f.NoCover {
		args = append(slices.Clip(args), "--no-cover") // as the run that showed it
	}
	if f.NoCensus {
		args = append(slices.Clip(args), "--no-census")
	}
	return ReplayCommand(args, f.Corrupt, file)
}
