package obs

// Rollback is what the executor measured in the main process around one
// fork that carried fault injection (prog.Op.FailNth), or around the life
// of a child that was killed before it was released. Package checker
// (rollback.go) turns it into findings; docs/rollback.md says why each
// measurement shows what it shows.
//
// "Before" measurements are taken right before the fork; "after" ones right
// after the failed fork returned (Cause "fail-nth") or right after the
// killed child was reaped (Cause "kill").
type Rollback struct {
	Fork  int    `json:"fork"`
	Op    int    `json:"op"`    // the fork operation
	At    int    `json:"at"`    // the operation after which "after" was measured
	Cause string `json:"cause"` // CauseFailNth or CauseKill
	// Injection says what happened to the requested fault: InjInjected (the
	// kernel failed the FailNth-th check, fail-nth read back 0),
	// InjNotReached (fork made fewer checks; Remaining is what was left) or
	// InjUnsupported (Reason says why; the fork ran without injection).
	FailNth   int    `json:"fail_nth,omitempty"`
	Injection string `json:"injection,omitempty"`
	Remaining int    `json:"remaining,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Setup lists the fault-injection settings the executor applied
	// (debugfs file=value), so a finding states exactly what was injected.
	Setup []string `json:"setup,omitempty"`
	// Site is where the kernel says it injected the fault (its log's
	// stack trace, innermost caller first), "" if it did not say.
	Site string `json:"site,omitempty"`
	// Silent: the fault was injected and the kernel, set to report every
	// injected fault (verbose=2), wrote no report. Linux fails an
	// allocation that asks for no warning (__GFP_NOWARN) silently
	// (lib/fault-inject.c, FAULT_NOWARN): such an allocation is never a
	// reported site, and a fork often survives it (the caller falls back).
	Silent bool `json:"silent,omitempty"`
	// Part says on which side of the program's memory a failed fork with
	// fail_nth stopped (PartProgram, PartRuntime; the executor's arena
	// sentinel, `arena low` programs only); PartUnknown says why it was
	// not measured.
	Part        string `json:"part,omitempty"`
	PartUnknown string `json:"part_unknown,omitempty"`
	// Memcg says what the oom_memcg limit did (memory.events during the
	// fork) or why there was none ("unsupported: ..."); MemcgHit is set
	// when the group reached its limit during the fork.
	Memcg    string `json:"memcg,omitempty"`
	MemcgHit bool   `json:"memcg_hit,omitempty"`
	Errno    int    `json:"errno"` // what fork returned
	// Children of the forking thread (/proc/thread-self/children) before
	// and after: a failed fork must not leave a new one.
	ChildrenBefore []int `json:"children_before"`
	ChildrenAfter  []int `json:"children_after"`
	// Comparable is set when nothing but the fork (and for a kill, the
	// kill and the wait) ran between the two measurements, so maps and
	// content must be identical.
	Comparable bool `json:"comparable"`
	// MapsBefore/After are the arena lines of /proc/self/maps.
	MapsBefore string `json:"maps_before"`
	MapsAfter  string `json:"maps_after"`
	// Content digests of every readable arena page (sum of WordDigest over
	// non-zero words, per page mixed with its address) and page counts.
	DigestBefore uint64 `json:"digest_before"`
	DigestAfter  uint64 `json:"digest_after"`
	PagesBefore  int    `json:"pages_before"`
	PagesAfter   int    `json:"pages_after"`
	// The write pass: an atomic "or 0" (a write that keeps the value) on
	// every resident writable arena page that is not a private file mapping,
	// on the forking thread, counting its minor faults (getrusage
	// RUSAGE_THREAD). BaselineFaults is the same pass right before the fork.
	WritePages     int   `json:"write_pages"`
	BaselineFaults int64 `json:"baseline_faults"`
	Faults         int64 `json:"faults"`
	PassNanos      int64 `json:"pass_ns"`
	// PageTables (kB, /proc/meminfo, whole system) and the main process's
	// VmPTE (kB, /proc/self/status) before and after.
	PageTablesBefore int64 `json:"pagetables_before_kb"`
	PageTablesAfter  int64 `json:"pagetables_after_kb"`
	VmPTEBefore      int64 `json:"vmpte_before_kb"`
	VmPTEAfter       int64 `json:"vmpte_after_kb"`
	// OthersVmPTEBefore/After (kB) sum VmPTE over the executor's other
	// descendants (the program's other processes: siblings, their
	// children) at the two measurements, so that their page tables, which
	// PageTables counts too, are not taken for a leak; OthersAfter lists
	// their pids at the second one. OthersMeasured is false in
	// observations of executors that did not measure them.
	OthersMeasured    bool  `json:"others_measured,omitempty"`
	OthersVmPTEBefore int64 `json:"others_vmpte_before_kb,omitempty"`
	OthersVmPTEAfter  int64 `json:"others_vmpte_after_kb,omitempty"`
	OthersAfter       []int `json:"others_after,omitempty"`
	// VMAsBefore counts the main process's VMAs right before the fork
	// (the Go runtime's too), VMAsBelowArena those below the program's
	// regions: with VmPTEBefore they explain how many failure points a
	// fork has (docs/rollback.md).
	VMAsBefore     int `json:"vmas_before,omitempty"`
	VMAsBelowArena int `json:"vmas_below_arena,omitempty"`
	// PageTablesNote says why PageTables was not measured (-1), if so.
	PageTablesNote string `json:"pagetables_note,omitempty"`
	// MemoryNote says why content digests and write passes were not
	// taken (threads of the program may change mappings meanwhile, so
	// touching memory could fault), if so.
	MemoryNote string `json:"memory_note,omitempty"`
	// PMD flags of the main process's user PMDs inside the arena, read
	// from the forkfuzz_pmd kernel module; PMDSource says where they came
	// from or why there are none ("absent: ...").
	PMDSource string     `json:"pmd_source"`
	PMDBefore []PMDEntry `json:"pmd_before,omitempty"`
	PMDAfter  []PMDEntry `json:"pmd_after,omitempty"`
	// Child is the fault injected into the child's own context before it
	// returned to user space (prog.Op.ChildFail), nil without one.
	Child *ChildFault `json:"child,omitempty"`
}

// ChildFault is what happened to a fault injected into the child's side
// of a fork (prog.Op.ChildFail): the parent wrote the child's fail-nth
// and sent it SIGSTOP while the child was held off the CPU, then waited
// until the child either stopped on its way to user space (it survived
// everything before user space) or died there.
type ChildFault struct {
	FailNth int `json:"fail_nth"`
	// Injection: InjInjected (the child's fail-nth read back 0),
	// InjNotReached (Remaining left: the child passed FailNth-Remaining
	// failure points before user space) or InjUnsupported (Reason).
	Injection string `json:"injection"`
	Remaining int    `json:"remaining,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Site is the kernel log's fault report (kmsg: innermost frames
	// first), Phase where that stack was: PhaseCopy (Async-fork's copy
	// in the child), PhaseChild (elsewhere in the child before user
	// space), PhaseOther (not the child's stack), "" (no report).
	Site  string `json:"site,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Silent: childfail was injected, reports were on, and the child,
	// read after it stopped or died, printed none: an allocation that
	// asks for no warning (as Rollback.Silent).
	Silent bool `json:"silent,omitempty"`
	// Outcome: ChildStopped (it reached user space and stopped on
	// SIGSTOP; it went on with SIGCONT) or ChildDied (it died before user
	// space: Signal is the signal that killed it, 0 if it exited, Status
	// its exit code then).
	Outcome string `json:"outcome"`
	Signal  int    `json:"signal,omitempty"`
	Status  int    `json:"status,omitempty"`
	// Ran is set when the child had already been on a CPU when the
	// parent armed it (the fault may have missed the start of its copy).
	Ran string `json:"ran,omitempty"`
	// ChildOOM is the child_oom budget (bytes) when the fault was a
	// memory cgroup limit rather than fail-nth (FailNth 0); Injection is
	// then InjInjected when the child's group reached its limit, and
	// Memcg says what the limit and memory.events did.
	ChildOOM uint64 `json:"child_oom,omitempty"`
	Memcg    string `json:"memcg,omitempty"`
}

// Where a child's fault struck (ChildFault.Phase).
const (
	PhaseCopy  = "copy"
	PhaseChild = "child"
	PhaseOther = "other"
)

// Outcomes of a child with an injected fault (ChildFault.Outcome).
const (
	ChildStopped = "stopped"
	ChildDied    = "died"
)

// CopyKilled reports whether the child of a fork with childfail died
// before it reached user space.
func (rb *Rollback) CopyKilled() bool {
	return rb != nil && rb.Child != nil && rb.Child.Outcome == ChildDied
}

// Rollback causes.
const (
	CauseFailNth = "fail-nth"
	CauseKill    = "kill"
	// CauseOOMMemcg: the fork ran under a memory cgroup limit (oom_memcg)
	// and no fail_nth.
	CauseOOMMemcg = "oom-memcg"
	// CauseChildFail: a fault was injected into the child's side of the
	// fork (childfail); "after" is measured once the child was reaped.
	CauseChildFail = "child-fail"
)

// Injection outcomes.
const (
	InjInjected    = "injected"
	InjNotReached  = "not-reached"
	InjUnsupported = "unsupported"
)

// PMDEntry is one PMD entry of a process's page tables.
type PMDEntry struct {
	Addr    uint64 `json:"addr"` // 2 MiB-aligned virtual address it maps
	Present bool   `json:"present"`
	RW      bool   `json:"rw"`
	Huge    bool   `json:"huge"` // maps a huge page (no PTE table)
}

// Where a failed fork stopped (Rollback.Part).
const (
	// PartProgram: before dup_mmap had copied every program region (in
	// fork's set-up, the executor's image or the program's regions): a
	// failure point at the same K on every run.
	PartProgram = "program"
	// PartRuntime: after the program's regions, in the Go runtime's
	// memory, whose failure points move from run to run.
	PartRuntime = "runtime"
)
