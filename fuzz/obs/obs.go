// Package obs defines an observation: what one run of a program did and what
// every process saw, as plain JSON-serializable data. Executors produce it,
// oracles (package checker) judge it together with the program.
//
// It also defines the binary record stream (wire.go) in which forked children,
// which cannot use the Go runtime, report to the executor.
package obs

import "sort"

// Version is the observation format version.
const Version = 1

// Observation is the result of running one program.
type Observation struct {
	Version int `json:"version"`
	// Ops has one entry per program operation, in program order.
	Ops []OpResult `json:"ops"`
	// Views are the dumps taken by every process, in the order they were taken.
	Views []View `json:"views"`
	// Truncated is set when the report buffer overflowed; views may be incomplete.
	Truncated bool `json:"truncated,omitempty"`
	// Maps is the main process's /proc/self/maps after the last operation.
	// Its addresses (and those of Rollback.MapsBefore/After) are real ones:
	// under "arena low" the regions start at ArenaBase, not at the canonical
	// address every other field uses.
	Maps string `json:"maps,omitempty"`
	// ArenaBase is where region r0 really was when it is not the canonical
	// prog.ArenaBase (a program with "arena low"); 0 otherwise.
	ArenaBase uint64 `json:"arena_base,omitempty"`
	// Events are harness-level events (e.g. a fault in the main process).
	Events []Event `json:"events,omitempty"`
	// Threads are the timed stores of the main process's extra threads.
	Threads []ThreadLog `json:"threads,omitempty"`
	// Rollbacks are the executor's measurements of the main process around
	// forks that carried fault injection or whose child was killed
	// (rollback.go).
	Rollbacks []Rollback `json:"rollbacks,omitempty"`
	// Corruption names the test-only corruption the executor applied, if any.
	// Checkers never read it; it is there so a human reading a finding knows.
	Corruption string `json:"corruption,omitempty"`
	// Kernel is the release (uname -r) of the kernel the program ran on;
	// the reference model follows it where Linux changed behaviour.
	Kernel string `json:"kernel,omitempty"`
	// ForkImpl is the fork implementation the program ran under and the
	// per-fork evidence that it took effect (forkimpl.go); nil when none
	// was requested.
	ForkImpl *ForkImpl `json:"fork_impl,omitempty"`
	// ForkPages is, per fork of the main process, how the kernel held the
	// regions' pages around the call (atfork.go; empty when the target
	// does not look).
	ForkPages []ForkPages `json:"fork_pages,omitempty"`
	// Holds are the forks whose child was held off the CPU past the fork
	// (prog.Op.Hold), and whether the hold held.
	Holds []ForkHold `json:"holds,omitempty"`
	// Cover is the kernel coverage of the run (nil: the target collects none).
	Cover *Coverage `json:"cover,omitempty"`
	// Phases is where the run's time went in the target, in microseconds
	// by phase name ("ops", "views", "census", "kcov", "start", ...;
	// nil: the target does not say).
	Phases map[string]int64 `json:"phases,omitempty"`
	// Work splits the "program" phase by what the program's processes
	// did, in microseconds summed over every process (children and
	// threads too, so the sum can exceed the phase): each operation
	// kind by name (the time in its interpreter: a fork's includes its
	// census and evidence, a wait's the child's run), and "view",
	// "census", "evidence", "kcov-drain" apart (nil: not measured).
	Work map[string]int64 `json:"work,omitempty"`
	// ExecutorMem is the executor's own memory when the program started:
	// every fork of the main process copies the page tables of its
	// private resident memory (nil: the target does not say).
	ExecutorMem *ExecutorMem `json:"executor_mem,omitempty"`
}

// ExecutorMem is the executor process's memory, in KiB: RssAnon and VmPTE
// of /proc/self/status, and the Go runtime's resident heap and stacks.
type ExecutorMem struct {
	RssAnonKB int64 `json:"rss_anon_kb"`
	PTEKB     int64 `json:"pte_kb"`
	HeapKB    int64 `json:"heap_kb"`
	StackKB   int64 `json:"stack_kb"`
}

// ForkHold is how a fork's hold (prog.Op.Hold) went.
type ForkHold struct {
	Fork int `json:"fork"`
	Op   int `json:"op"`
	// Ops counts the parent's operations the hold lasted (less than the
	// fork's Hold when a fork, wait or kill or the end of the program
	// ended it first).
	Ops int `json:"ops"`
	// Ran is empty when the child had not been on a CPU when the hold
	// ended; else why the hold did not hold (the parent blocked, or it
	// could not pin itself) and the child's schedstat.
	Ran string `json:"ran,omitempty"`
}

// OpResult is what one operation returned.
type OpResult struct {
	Ran   bool   `json:"ran"`
	Errno int    `json:"errno,omitempty"`
	Ret   uint64 `json:"ret,omitempty"` // mremap: new address; fork: pid; wait: raw wait status
	Start int64  `json:"start,omitempty"`
	End   int64  `json:"end,omitempty"`
	// Skipped counts the slots of a store that were not written because
	// /proc/self/maps showed the page as not writable or not mapped.
	Skipped int `json:"skipped,omitempty"`
	// TSCStart and TSCEnd bound a fork call of the main process in TSC
	// ticks, the clock of ThreadLog stores.
	TSCStart uint64 `json:"tsc_start,omitempty"`
	TSCEnd   uint64 `json:"tsc_end,omitempty"`
	// Overlap, on a fork of the main process whose threads logged stores,
	// counts the stores around the call (atfork.go), over the whole logs
	// before the executor trimmed them.
	Overlap *Overlap `json:"overlap,omitempty"`
	// Data are the non-zero words an operation read (readpipe: Off is the
	// byte offset in what was read; Region is -1).
	Data []Word `json:"data,omitempty"`
	// Skip says why the executor could not do the operation at all (the
	// kernel or the environment lacks what it needs); empty when it ran.
	Skip string `json:"skip,omitempty"`
}

// ThreadLog is every store one thread made, in order.
type ThreadLog struct {
	Thread int         `json:"thread"`
	Stores TimedStores `json:"stores"`
	// Moves are the passes of the thread's migrateloops.
	Moves []TimedMove `json:"moves,omitempty"`
	// Dropped counts stores beyond the log's capacity (not recorded).
	Dropped int `json:"dropped,omitempty"`
	// Trimmed counts stores the executor left out because no fork's
	// consistent-cut judgement can depend on them (they are neither near
	// a fork call nor a cell's last store before or first after one).
	Trimmed int `json:"trimmed,omitempty"`
}

// TimedMove is one pass of a migrateloop (operation Op): Pages pages moved
// to another NUMA node between Inv and Resp (TSC).
type TimedMove struct {
	Op    int    `json:"op"`
	Pages int    `json:"pages"`
	Inv   uint64 `json:"inv"`
	Resp  uint64 `json:"resp"`
}

// TimedStore is one store with its invocation and response times (fenced
// TSC reads taken immediately around the store instruction).
type TimedStore struct {
	Op    int    `json:"op"`
	Slot  int    `json:"slot"` // k of prog.SlotValue(Op, k)
	Value uint64 `json:"value"`
	Inv   uint64 `json:"inv"`
	Resp  uint64 `json:"resp"`
}

// PageState is what a mapped page allows.
type PageState uint8

const (
	// Readable: mapped and readable; its content is in the view.
	Readable PageState = iota + 1
	// NoAccess: mapped without read permission.
	NoAccess
	// BeyondEOF: mapped past the end of its backing object (would SIGBUS).
	BeyondEOF
)

func (s PageState) String() string {
	switch s {
	case Readable:
		return "readable"
	case NoAccess:
		return "noaccess"
	case BeyondEOF:
		return "beyond-eof"
	}
	return "unmapped"
}

// At values of a view that was not taken at an explicit check operation.
const (
	AtStart = -1 // a child's view before its first operation
	AtEnd   = -2 // the main process's view after the last operation
)

// View is one process's view of every region at one moment.
type View struct {
	Proc int `json:"proc"` // 0 main, I+1 child of fork fI
	At   int `json:"at"`   // index of the check operation, or AtStart/AtEnd
	// VMAs are the mappings inside the arena, from /proc/self/maps.
	VMAs []VMA `json:"vmas,omitempty"`
	// Runs cover every mapped page of every region; pages in no run are unmapped.
	Runs []Run `json:"runs,omitempty"`
	// Pages lists readable pages whose content is not all zero.
	Pages PageDigests `json:"pages,omitempty"`
	// Words lists every non-zero 8-byte word of readable pages.
	Words     Words `json:"words,omitempty"`
	Truncated bool  `json:"truncated,omitempty"`
}

// VMA is one line of /proc/self/maps.
type VMA struct {
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	Prot   string `json:"prot"` // e.g. "rw-p"
	Offset uint64 `json:"offset"`
	Inode  uint64 `json:"inode"`
}

// Run is a maximal run of consecutive pages of one region in one state.
type Run struct {
	Region int       `json:"region"`
	First  int       `json:"first"`
	N      int       `json:"n"`
	State  PageState `json:"state"`
}

// PageDigest summarizes one page's content.
type PageDigest struct {
	Region  int    `json:"region"`
	Page    int    `json:"page"`
	Digest  uint64 `json:"digest"`
	NonZero int    `json:"nonzero"`
}

// Word is one non-zero 8-byte word.
type Word struct {
	Region int    `json:"region"`
	Off    uint64 `json:"off"`
	Value  uint64 `json:"value"`
}

// WordDigest is one word's contribution to a page digest. A page's digest
// is the sum (mod 2^64) over its non-zero words of WordDigest(offset in
// page, value); an all-zero page has digest 0. The sum form lets the
// reference model compute digests from sparse contents.
func WordDigest(off uint64, v uint64) uint64 {
	x := v ^ (off+1)*0x9e3779b97f4a7c15
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x | 1 // never zero, so a non-zero word always changes the digest
}

// SetWord changes one word of a view (0 removes it), keeping Words sorted
// and the page's digest and non-zero count consistent. Tests and the
// executor's test-only corruptions use it to falsify views.
func (v *View) SetWord(region int, off, val uint64) {
	old := uint64(0)
	ws := v.Words[:0]
	for _, w := range v.Words {
		if w.Region == region && w.Off == off {
			old = w.Value
			continue
		}
		ws = append(ws, w)
	}
	if val != 0 {
		ws = append(ws, Word{Region: region, Off: off, Value: val})
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Region != ws[j].Region {
			return ws[i].Region < ws[j].Region
		}
		return ws[i].Off < ws[j].Off
	})
	v.Words = ws
	const pageSize = 4096
	page, in := int(off/pageSize), off%pageSize
	for i := range v.Pages {
		d := &v.Pages[i]
		if d.Region == region && d.Page == page {
			if old != 0 {
				d.Digest -= WordDigest(in, old)
				d.NonZero--
			}
			if val != 0 {
				d.Digest += WordDigest(in, val)
				d.NonZero++
			}
			if d.NonZero == 0 {
				v.Pages = append(v.Pages[:i], v.Pages[i+1:]...)
			}
			return
		}
	}
	if val != 0 {
		v.Pages = append(v.Pages, PageDigest{Region: region, Page: page, Digest: WordDigest(in, val), NonZero: 1})
	}
}

// StateAt returns the state of a page in a view (0 when unmapped).
func (v *View) StateAt(region, page int) PageState {
	for _, r := range v.Runs {
		if r.Region == region && page >= r.First && page < r.First+r.N {
			return r.State
		}
	}
	return 0
}
