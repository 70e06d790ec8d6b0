// Package oracle is forkfuzz's table of oracles: every rule a finding can
// break, checker rules and target events alike, with what it judges. It
// sits on the lowest floor so that targets (which name their events),
// the checker, the judge and the gate all read one table. A new oracle is
// a row here; TestNoOracleLiterals rejects an oracle name written as a
// string anywhere else.
package oracle

import "strings"

// Name names an oracle; a finding's signature starts with it
// ("snapshot:lost-store:anon-private", "kernel-bug/kernel-BUG-in-...",
// "executor-hang").
type Name string

// Class says who fires an oracle.
type Class int

const (
	// Checker oracles compare what processes saw with the reference model.
	Checker Class = iota
	// Executor oracles are the executor's death or hang.
	Executor
	// Kernel oracles are reports on a VM's console (and a VM that stopped
	// answering): only QEMU targets watch a console.
	Kernel
)

// Unit is what an oracle's judgments count: an oracle that judged none
// passed nothing.
type Unit int

const (
	Runs Unit = iota
	Pages
	Views
	Ops
	Forks
	PipeReads
	Cells
	Rollbacks
)

var unitDoc = [...]string{
	Runs:      "programs that ran",
	Pages:     "pages compared in process views",
	Views:     "process views",
	Ops:       "operations that ran",
	Forks:     "forks that ran",
	PipeReads: "readpipe operations that ran",
	Cells:     "thread-written cells in child snapshots (programs with writer threads)",
	Rollbacks: "rollback measurements (forks with fail_nth, oom_memcg or a kill)",
}

func (u Unit) String() string { return unitDoc[u] }

// The oracles.
const (
	Snapshot        Name = "snapshot"
	Isolation       Name = "isolation"
	Shared          Name = "shared"
	Memory          Name = "memory"
	Mapping         Name = "mapping"
	Errno           Name = "errno"
	Skipped         Name = "skipped"
	ChildExit       Name = "child-exit"
	MissingView     Name = "missing-view"
	UnexpectedView  Name = "unexpected-view"
	Crash           Name = "crash"
	Observation     Name = "observation"
	Pipe            Name = "pipe"
	Linearizability Name = "linearizability"
	LinUnknown      Name = "linearizability-unknown"
	Rollback        Name = "rollback"
	PageTable       Name = "pagetable"

	ExecutorCrash Name = "executor-crash"
	ExecutorHang  Name = "executor-hang"

	KernelPanic          Name = "kernel-panic"
	KernelBug            Name = "kernel-bug"
	KernelWarning        Name = "kernel-warning"
	KernelKASAN          Name = "kernel-kasan"
	KernelRSS            Name = "kernel-rss-counter"
	KernelPageTable      Name = "kernel-page-table-check"
	KernelHang           Name = "kernel-hang"
	KernelLostConnection Name = "kernel-lost-connection"
)

// Info is one oracle's row.
type Info struct {
	Name   Name
	Class  Class
	Judges Unit
	Doc    string
}

// Table is every oracle, checker oracles first, in a fixed order.
var Table = []Info{
	{Snapshot, Checker, Pages, "a child's start view differs from the parent at fork"},
	{Isolation, Checker, Pages, "a write crossed between parent and child private memory"},
	{Shared, Checker, Pages, "a MAP_SHARED write was not seen where it must be"},
	{Memory, Checker, Pages, "a process's own memory differs from the model"},
	{Mapping, Checker, Views, "readable/writable/mapped state differs from the model"},
	{Errno, Checker, Ops, "an operation returned another result than Linux's"},
	{Skipped, Checker, Ops, "the executor skipped an operation the model expected to run"},
	{ChildExit, Checker, Forks, "a child ended otherwise than expected"},
	{MissingView, Checker, Views, "a view the program takes is absent"},
	{UnexpectedView, Checker, Views, "a view no process should have taken is present"},
	{Crash, Checker, Forks, "the executor's main process took a fault"},
	{Observation, Checker, Ops, "the observation itself is malformed or impossible"},
	{Pipe, Checker, PipeReads, "a pipe showed what vmsplice never put in it"},
	{Linearizability, Checker, Cells, "a child snapshot is not a consistent cut of thread stores"},
	{LinUnknown, Checker, Cells, "porcupine could not decide the consistent cut in its time"},
	{Rollback, Checker, Rollbacks, "a failed fork did not leave the parent as it was"},
	{PageTable, Checker, Rollbacks, "page-table invariants (PMD RW restored, no endless write fault)"},

	{ExecutorCrash, Executor, Runs, "the executor process died running the program"},
	{ExecutorHang, Executor, Runs, "the executor gave no answer within the program's timeout"},

	{KernelPanic, Kernel, Runs, "the kernel stopped: Kernel panic - not syncing"},
	{KernelBug, Kernel, Runs, "BUG:, kernel BUG at, Oops, general protection fault"},
	{KernelWarning, Kernel, Runs, "WARNING: (the kernel keeps running)"},
	{KernelKASAN, Kernel, Runs, "KASAN, KFENCE or UBSAN reports"},
	{KernelRSS, Kernel, Runs, "BUG: Bad rss-counter state"},
	{KernelPageTable, Kernel, Runs, "page_table_check's reports"},
	{KernelHang, Kernel, Runs, "hung task, RCU stall, soft or hard lockup; a VM that sent nothing"},
	{KernelLostConnection, Kernel, Runs, "the VM's connection broke with no kernel report"},
}

// Lookup returns n's row.
func Lookup(n Name) (Info, bool) {
	for _, in := range Table {
		if in.Name == n {
			return in, true
		}
	}
	return Info{}, false
}

// Of returns the class's oracles in table order.
func Of(c Class) []Name {
	var out []Name
	for _, in := range Table {
		if in.Class == c {
			out = append(out, in.Name)
		}
	}
	return out
}

// Events are the oracles targets' events name (executor and kernel).
func Events() []Name { return append(Of(Executor), Of(Kernel)...) }

// kernelPrefix starts every kernel oracle's name.
const kernelPrefix = "kernel-"

// ForKernelReport is the oracle of a console report of kind kind (a
// kernel/report.Kind, or "hang" and "lost-connection" for a VM that
// stopped answering).
func ForKernelReport(kind string) Name { return Name(kernelPrefix + kind) }

// FromSignature is the oracle a finding's signature names: the part
// before "/" of an event's ("kernel-bug/kernel-BUG-in-x"), before ":" of
// a checker finding's ("snapshot:lost-store:anon-private").
func FromSignature(sig string) Name {
	for _, in := range Table {
		if in.Class == Checker {
			continue
		}
		if sig == string(in.Name) || strings.HasPrefix(sig, string(in.Name)+"/") {
			return in.Name
		}
	}
	if strings.HasPrefix(sig, kernelPrefix) {
		n, _, _ := strings.Cut(sig, "/")
		return Name(n)
	}
	n, _, _ := strings.Cut(sig, ":")
	return Name(n)
}
