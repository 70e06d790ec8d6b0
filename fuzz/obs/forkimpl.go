package obs

import (
	"fmt"
	"strings"
)

// ForkImpl is what the executor did to run a program under a fork
// implementation other than the kernel's stock fork (agents/executor
// forkimpl.go: a profile names the knob and how it is switched on), and
// the per-fork evidence that the implementation took effect.
type ForkImpl struct {
	// Profile is the requested profile ("async-fork", "stock", ...).
	Profile string `json:"profile"`
	// Applied says how the knob was set, e.g.
	// "/sys/fs/cgroup/forkfuzz-executor-77/memory.async_fork=1 (read back 1)".
	Applied []string `json:"applied,omitempty"`
	// Forks has one entry per fork of the main process that ran.
	Forks []ForkEvidence `json:"forks,omitempty"`
}

// Evidence verdicts for one fork.
const (
	// EvDeferred: right after fork returned, before the child had run, the
	// parent's memory was not yet shared with the child (its copy of the
	// page tables was deferred: Async-fork, or shared page tables:
	// On-demand-fork).
	EvDeferred = "deferred"
	// EvEager: the page tables were copied (the pages were shared with the
	// child) by the time fork returned: stock fork.
	EvEager = "eager"
	// EvUnknown: the executor could not tell (Why says why).
	EvUnknown = "unknown"
)

// ForkEvidence is the evidence for one fork of the main process. The
// executor keeps the child from running until it has looked (it pins
// itself and the child to one CPU and runs SCHED_FIFO across the fork),
// then reads /proc/self/pagemap: a private page the parent wrote right
// before the fork is mapped by both processes after an eager fork
// (PM_MMAP_EXCLUSIVE clear) and by the parent alone while the child's copy
// is still pending (set). With the forkfuzz_pmd module loaded it also
// counts the parent's write-protected table PMDs.
type ForkEvidence struct {
	Fork    int    `json:"fork"`
	Op      int    `json:"op"`
	Verdict string `json:"verdict"` // EvDeferred, EvEager or EvUnknown
	// Probe is the executor's probe page: "exclusive" (copy deferred),
	// "shared" (copied) or why it could not be read.
	Probe string `json:"probe"`
	// Pages counts the present private anonymous pages of the program's
	// regions right after the fork, Exclusive those still mapped by the
	// parent alone (deferred copy, or pages fork copies anyway: pinned,
	// wipe-on-fork).
	Pages     int `json:"pages"`
	Exclusive int `json:"exclusive"`
	// PMDsWP counts the parent's table PMDs over the program's regions
	// with RW clear right after the fork (-1: no forkfuzz_pmd module).
	PMDsWP int `json:"pmds_wp"`
	// PMDsWPAfterWait counts them again right after the child was reaped
	// by operation AtWait, when this was the main process's latest fork
	// (no copy can be in flight then: it must be 0); -1 when not measured.
	PMDsWPAfterWait int      `json:"pmds_wp_after_wait"`
	AtWait          int      `json:"at_wait,omitempty"`
	WPAfterWait     []uint64 `json:"wp_after_wait,omitempty"` // their addresses
	// Pinned: the child was held off the CPU until the evidence was read
	// (without it a shared probe page proves nothing: the child may
	// already have copied).
	Pinned bool   `json:"pinned"`
	Why    string `json:"why,omitempty"`
	// Late says the child ran after the probe was read but before the
	// page and PMD counts were: the verdict stands, the counts may
	// already show part of the child's copy.
	Late string `json:"late,omitempty"`
}

// ForkImplError is a harness error: a fork implementation was requested
// but the evidence says a fork did not use it (or cannot tell). It is
// never a finding: the campaign did not test what it was asked to.
type ForkImplError struct {
	Profile string
	Msg     string
}

func (e *ForkImplError) Error() string {
	return fmt.Sprintf("fork implementation %q did not take effect: %s", e.Profile, e.Msg)
}

// DeferredProfile reports whether a profile's forks must defer the page
// table copy (every profile but "stock" does).
func DeferredProfile(profile string) bool { return profile != "" && profile != "stock" }

// CheckForkImpl checks the fork-implementation evidence of an observation:
// with a deferring profile no fork of the main process may show EvEager;
// with "stock" none may show EvDeferred. EvUnknown (the child ran before
// the executor could look, because the parent blocked) decides nothing;
// Undecided reports a run where no fork decided. It returns nil when no
// profile was requested or no fork ran.
func CheckForkImpl(o *Observation) error {
	if o == nil || o.ForkImpl == nil || len(o.ForkImpl.Forks) == 0 {
		return nil
	}
	fi := o.ForkImpl
	want, wrong := EvEager, EvDeferred
	if DeferredProfile(fi.Profile) {
		want, wrong = EvDeferred, EvEager
	}
	var bad []string
	for _, f := range fi.Forks {
		if f.Verdict == wrong {
			bad = append(bad, describe(f, want))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &ForkImplError{Profile: fi.Profile, Msg: strings.Join(bad, "; ") + " [set up: " + strings.Join(fi.Applied, ", ") + "]"}
}

// Undecided returns why no fork of the run decided ("" when one did, or
// when there was no fork or no profile).
func Undecided(o *Observation) string {
	if o == nil || o.ForkImpl == nil || len(o.ForkImpl.Forks) == 0 {
		return ""
	}
	var u []string
	for _, f := range o.ForkImpl.Forks {
		if f.Verdict != EvUnknown {
			return ""
		}
		u = append(u, describe(f, "a decision"))
	}
	return strings.Join(u, "; ")
}

func describe(f ForkEvidence, want string) string {
	s := fmt.Sprintf("fork f%d (op %d): %s, want %s (probe page %s; %d/%d region pages exclusive", f.Fork, f.Op, f.Verdict, want, f.Probe, f.Exclusive, f.Pages)
	if f.PMDsWP >= 0 {
		s += fmt.Sprintf("; %d write-protected PMDs", f.PMDsWP)
	}
	s += ")"
	if f.Late != "" {
		s += " (" + f.Late + ")"
	}
	if f.Why != "" {
		s += ": " + f.Why
	}
	return s
}
