package agents

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// The optional capabilities of a Target: interfaces a target may
// implement besides Target. Each is declared here and nowhere else
// (TestCapabilitiesDeclaredOnce); TestCapabilities lists them with the
// targets that have each. Ask through the helper beside a capability
// where there is one.
//
// A wrapper (ForkImplTarget, the gate's budget) implements Target over
// another target. Whether a question goes through it depends on the
// capability: a kernel image is the wrapped target's (KernelImageOf
// unwraps), but running programs in parallel is a promise about the
// wrapper's own Run, which it must make itself (Parallelism does not
// unwrap; ForkImplTarget passes its target's on).

// Parallel is the capability of a target that runs several programs at
// once, each Run on its own goroutine. Without it Run is never called
// concurrently.
type Parallel interface {
	Parallel() int
}

// Parallelism returns how many programs t runs at once (at least 1). It
// does not look through wrappers (see above).
func Parallelism(t Target) int {
	if pt, ok := t.(Parallel); ok {
		return max(1, pt.Parallel())
	}
	return 1
}

// Wrapper is the capability of a target that runs its programs on
// another target (ForkImplTarget): Unwrap returns that target.
type Wrapper interface {
	Unwrap() Target
}

// Unwrap returns the target a wrapper runs on, all the way down (t itself
// when it is no Wrapper).
func Unwrap(t Target) Target {
	for {
		w, ok := t.(Wrapper)
		if !ok {
			return t
		}
		t = w.Unwrap()
	}
}

// KernelImager is the capability of a target that boots a kernel image
// (vm.Target): the image names the kernel in verdicts, replay commands and
// the coverage corpus.
type KernelImager interface {
	// KernelImage is the path of the image the target boots.
	KernelImage() string
	// KernelRelease is the booted kernel's uname, release and version
	// ("6.1.0-57-cloud-amd64 #1 SMP ..."), "" before the first boot.
	KernelRelease() string
}

// KernelImageOf returns the KernelImager t runs on, looking through
// wrappers: a wrapper runs on its target's kernel.
func KernelImageOf(t Target) (KernelImager, bool) {
	ki, ok := Unwrap(t).(KernelImager)
	return ki, ok
}

// ForkImplLister is the capability of a target that knows which
// fork-implementation profiles its kernel has (a VM reports it at boot).
type ForkImplLister interface {
	ForkImpls() []string
}

// PendingEvents is the capability of a target that may hold events seen
// while it was opened; TakePending returns them once. A campaign saves
// them as findings like any other, then stops.
type PendingEvents interface {
	TakePending() []Pending
}

// Pending is an event a target saw before the campaign's first program
// (a kernel that broke on the fork-implementation calibration's first
// fork): the program that showed it, the options it ran with, and the
// event (an Event error).
type Pending struct {
	Program *prog.Program
	Options Options
	Err     error
	// Note says where it ran ("fork-implementation calibration, run 1").
	Note string
}

// HugetlbHost is the capability of a target with 2 MiB hugetlb pages for
// programs' hugetlb regions (vm.Target: the guest reserves them at boot;
// Native: the host's free ones). A target without it has none.
type HugetlbHost interface {
	// HugetlbPages is how many free 2 MiB hugetlb pages a program may
	// use (each program runs alone in its VM or executor).
	HugetlbPages() int
}

// HugetlbPages is what t (or the target it wraps) offers hugetlb
// regions: its HugetlbHost answer, 0 without the capability.
func HugetlbPages(t Target) int {
	for t != nil {
		if h, ok := t.(HugetlbHost); ok {
			return h.HugetlbPages()
		}
		w, ok := t.(Wrapper)
		if !ok {
			return 0
		}
		t = w.Unwrap()
	}
	return 0
}

// FileSystemHost is the capability of a target with directories on the
// file systems of the file region kinds (vm.Target: the guest's /tmp and
// its ext4 image, as the agent reported them at boot; Native: the host's,
// executor.FileDir). A target without it has none.
type FileSystemHost interface {
	FileSystems() []prog.FS
}

// FileSystemsOf is what t (or the target it wraps) offers file regions:
// its FileSystemHost answer, none without the capability.
func FileSystemsOf(t Target) []prog.FS {
	for t != nil {
		if h, ok := t.(FileSystemHost); ok {
			return h.FileSystems()
		}
		w, ok := t.(Wrapper)
		if !ok {
			return nil
		}
		t = w.Unwrap()
	}
	return nil
}
