package agents

import (
	"errors"
	"maps"
	"time"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Target runs programs somewhere and reports what happened. This is the
// whole contract between targets and everything above them.
//
// Run executes one program with opt and returns one of:
//   - an observation and nil: the program ran; judge the observation;
//   - an Event (errors.As(err, &ev) with ev an Event), with or without an
//     observation: the program made something happen that is itself a
//     finding (the executor died or hung, the kernel reported on the
//     console, the VM hung or rebooted). The Event names its oracle,
//     signature and explanation, and may carry files (EventFiles); an
//     observation returned with it is judged too;
//   - any other error: a harness failure (the target could not run the
//     program at all). It is never a finding; callers count it and give
//     up after several in a row.
//
// Capabilities are optional interfaces a target may implement too, all
// declared in capabilities.go: Parallel (how many programs may run at
// once), Wrapper (a target that runs on another), KernelImager (a target
// that boots a kernel image), ForkImplLister (the fork implementations the
// kernel has), PendingEvents (events seen while the target opened),
// HugetlbHost (free 2 MiB hugetlb pages for programs' hugetlb regions) and
// FileSystemHost (file systems for programs' file regions).
//
// Targets today: Native (host kernel), vm.Target (QEMU VMs), sim.Target
// (the simulated kernel). Adding one: implement Target, make every event
// error implement Event, and add it to the CLI's target table.
type Target interface {
	Name() string
	Run(p *prog.Program, opt Options) (*obs.Observation, error)
	Close() error
}

// Options are the per-run switches every target accepts.
type Options struct {
	// WordCap bounds the non-zero words recorded per view (0: default).
	WordCap int
	// DigestsFirst: views carry words only where threads race
	// (executor.Options.DigestsFirst); the checker judges the other
	// pages by digest.
	DigestsFirst bool
	// Corrupt is a test-only switch that makes the executor falsify the
	// observation in a stated way (executor.Corruptions), to prove the
	// oracles bite. Targets without an executor reject it.
	Corrupt string
	// ForkImpl is the fork-implementation profile (executor.ForkImplProfiles)
	// the program's processes fork with; "" leaves the target as it is.
	// ForkImplTarget sets it and checks the evidence.
	ForkImpl string
	// ForkImplNoEvidence (test only): apply ForkImpl without evidence
	// (executor.Options.ForkImplNoEvidence).
	ForkImplNoEvidence bool
	// Symbols asks a target that collects kernel coverage for the
	// kernel's text symbols too (obs.Coverage.Symbols).
	Symbols bool
	// NoCover asks the target not to collect kernel coverage.
	NoCover bool
	// NoForkPages asks the target not to take its page census around
	// forks (evidence, never judged; for measuring its cost).
	NoForkPages bool
	// HeapTHP: executor.Options.HeapTHP (for measuring).
	HeapTHP bool
	// SyncKcovDrain: executor.Options.SyncKcovDrain (for measuring).
	SyncKcovDrain bool
	// ChildKcovGrow: executor.Options.ChildKcovGrow (for measuring).
	ChildKcovGrow string
	// RecyclePTEKB: executor.Options.RecyclePTEKB (a fresh executor
	// once the page tables of the long-lived one reach this; 0: never).
	RecyclePTEKB int64
	// Timeout bounds this run (0: the target's own, scaled by the
	// target with the program and the guest's measured speed where it
	// does). The gate replays a harness event with a longer one.
	Timeout time.Duration
}

// Refused reports whether err says the target refused to run a program
// it cannot host (a hugetlb region without free huge pages,
// executor.ErrNoHugetlb; a file region without its file system,
// executor.ErrNoFileSystem): nothing ran, nothing is judged, and it is no
// harness error.
func Refused(err error) bool {
	return errors.Is(err, executor.ErrNoHugetlb) || errors.Is(err, executor.ErrNoFileSystem)
}

// Executor returns the executor's options for opt.
func (opt Options) Executor() executor.Options {
	return executor.Options{WordCap: opt.WordCap, DigestsFirst: opt.DigestsFirst, Corrupt: opt.Corrupt, ForkImpl: opt.ForkImpl, ForkImplNoEvidence: opt.ForkImplNoEvidence,
		Symbols: opt.Symbols, NoCover: opt.NoCover, NoForkPages: opt.NoForkPages, HeapTHP: opt.HeapTHP, SyncKcovDrain: opt.SyncKcovDrain, ChildKcovGrow: opt.ChildKcovGrow, RecyclePTEKB: opt.RecyclePTEKB, TimeoutMs: int(opt.Timeout / time.Millisecond)}
}

// Event is an error a target returns when the program caused something
// that is a finding by itself (see Target). Implemented by
// *executor.CrashError, *vm.KernelReportError and *RecordedEvent.
type Event interface {
	error
	// Oracle names the oracle that fired ("executor-crash",
	// "executor-hang", "kernel-warning", "kernel-bug", ...).
	Oracle() string
	// Signature is the deduplication key, safe in a file name.
	Signature() string
	// Explanation is the readable account for a kernel developer.
	Explanation() string
}

// EventFiles is implemented by events that come with files for the
// finding directory (a VM's console, the kernel report).
type EventFiles interface {
	Files() map[string]string
}

// AsEvent returns the Event in err's chain, if any.
func AsEvent(err error) (Event, bool) {
	var ev Event
	if err != nil && errors.As(err, &ev) {
		return ev, true
	}
	return nil, false
}

// RecordedEvent is an Event as plain data, for carrying one across a wire
// (distributed campaigns) or a file: Record(ev) judges exactly like ev.
type RecordedEvent struct {
	OracleName  string            `json:"oracle"`
	Sig         string            `json:"signature"`
	Text        string            `json:"explanation"`
	Message     string            `json:"message"`
	Attachments map[string]string `json:"files,omitempty"`
}

// Record returns ev as plain data.
func Record(ev Event) *RecordedEvent {
	r := &RecordedEvent{OracleName: ev.Oracle(), Sig: ev.Signature(), Text: ev.Explanation(), Message: ev.Error()}
	if f, ok := ev.(EventFiles); ok {
		r.Attachments = maps.Clone(f.Files())
	}
	return r
}

func (r *RecordedEvent) Error() string            { return r.Message }
func (r *RecordedEvent) Oracle() string           { return r.OracleName }
func (r *RecordedEvent) Signature() string        { return r.Sig }
func (r *RecordedEvent) Explanation() string      { return r.Text }
func (r *RecordedEvent) Files() map[string]string { return r.Attachments }
