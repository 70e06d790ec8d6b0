package obs

// What the forking process's threads and pages did around one fork call:
// how many thread stores overlapped the kernel's copy, and how the kernel
// held the program's pages before the fork and after it (from
// /proc/self/pagemap and, where readable, /proc/kpageflags). Both are
// evidence of what a run actually exercised, not judgements: oracles do not
// read them; summaries do.

// Overlap counts the main process's thread stores around one fork call
// [TSCStart, TSCEnd] (OpResult of the fork).
type Overlap struct {
	// Stores is the threads' stores whose [Inv, Resp] intersects the call.
	Stores int `json:"stores"`
	// Inside is those that started and completed within the call: the
	// writer ran while the kernel copied.
	Inside int `json:"inside"`
	// Blocked is those still in flight when the call returned (Inv before
	// TSCEnd, Resp after): a store that waited for the fork, e.g. a fault
	// on a page fork had write-protected that waited for mmap_lock.
	Blocked int `json:"blocked"`
	// Ticks is the fork call's length (TSC ticks). Idle is, over the
	// threads that stored both before and after the call, the longest
	// time a thread made no store across it: from the end of its last
	// store that completed before the call to the start of its first
	// store after the call, minus Ticks, when no store of that thread
	// overlapped the call. A large Idle with Blocked 0 says the writer
	// was not running at all around the fork (not scheduled, or stopped
	// by something other than the fork), rather than waiting for it.
	Ticks uint64 `json:"ticks,omitempty"`
	Idle  uint64 `json:"idle,omitempty"`
	// Writers: the fork ran under storeloops (the counts above); Movers:
	// under migrateloops, whose passes that intersect the call moved
	// Moved pages (MovePasses passes). Migration entries exist while a
	// pass runs, so Moved > 0 says the copy could have met them.
	Writers    bool `json:"writers,omitempty"`
	Movers     bool `json:"movers,omitempty"`
	MovePasses int  `json:"move_passes,omitempty"`
	Moved      int  `json:"moved,omitempty"`
}

// CountOverlap counts the stores of logs around the call [lo, hi] (TSC).
func CountOverlap(logs []ThreadLog, lo, hi uint64) Overlap {
	ov := Overlap{Ticks: hi - lo}
	for _, tl := range logs {
		var before, after uint64 // last Resp before lo, first Inv after hi
		over := false
		for _, s := range tl.Stores {
			if s.Resp < lo && s.Resp > before {
				before = s.Resp
			}
			if s.Inv > hi && (after == 0 || s.Inv < after) {
				after = s.Inv
			}
			if s.Inv > hi || s.Resp < lo {
				continue
			}
			over = true
			ov.Stores++
			if s.Inv >= lo && s.Resp <= hi {
				ov.Inside++
			}
			if s.Resp > hi {
				ov.Blocked++
			}
		}
		if !over && before > 0 && after > 0 && after-before > ov.Ticks {
			ov.Idle = max(ov.Idle, after-before-ov.Ticks)
		}
		for _, mv := range tl.Moves {
			if mv.Inv <= hi && mv.Resp >= lo {
				ov.MovePasses++
				ov.Moved += mv.Pages
			}
		}
	}
	return ov
}

// ForkPages is how the kernel held the present pages of the program's
// regions in the forking (main) process just before one fork call and just
// after it returned, before the main thread touched memory again (its
// writer threads may have). Counts are pages.
type ForkPages struct {
	Fork int `json:"fork"`
	// Before the call (pagemap): resident pages, pages swapped out, pages
	// whose PTE carries the uffd write-protect bit.
	Present int `json:"present"`
	Swapped int `json:"swapped,omitempty"`
	UffdWP  int `json:"uffd_wp,omitempty"`
	// Before the call (kpageflags; only when Flags): resident pages that
	// are part of a transparent huge page, KSM pages and mlocked pages;
	// PMDMapped is the THP pages mapped by a PMD as a whole (the arena's
	// AnonHugePages in /proc/self/smaps, read only when THP > 0), so
	// THP - PMDMapped were PTE-mapped. Zero is the PTEs mapping the
	// shared zeropage (KPF_ZERO_PAGE), HugeZero the pages of the huge
	// zeropage mapped by a PMD (KPF_ZERO_PAGE with KPF_THP; not counted
	// in THP), Hugetlb the pages of hugetlb pages (KPF_HUGE). A read of
	// an untouched private anonymous page maps the zeropage.
	Flags     bool `json:"flags,omitempty"`
	THP       int  `json:"thp,omitempty"`
	PMDMapped int  `json:"pmd_mapped,omitempty"`
	KSM       int  `json:"ksm,omitempty"`
	Mlocked   int  `json:"mlocked,omitempty"`
	Zero      int  `json:"zero,omitempty"`
	HugeZero  int  `json:"huge_zero,omitempty"`
	Hugetlb   int  `json:"hugetlb,omitempty"`
	// File is the resident pages of a regular file's page cache (neither
	// anonymous nor swap-backed: not shmem, not a memfd; an ext4 file),
	// whether mapped shared or not yet copied in a private mapping.
	File int `json:"file,omitempty"`
	// After the call (pagemap of the parent): resident pages mapped
	// exclusively (not shared with the child: copied at fork because
	// pinned, not inherited, or written again since) and shared ones
	// (write-protected and shared with the child, or shared memory).
	Exclusive int `json:"exclusive"`
	Shared    int `json:"shared"`
	// Err says why the census is incomplete (e.g. pagemap unreadable).
	Err string `json:"err,omitempty"`
}

// Add sums b into a (Fork and Err are kept from a; Flags is or-ed).
func (a *ForkPages) Add(b ForkPages) {
	a.Present += b.Present
	a.Swapped += b.Swapped
	a.UffdWP += b.UffdWP
	a.Flags = a.Flags || b.Flags
	a.THP += b.THP
	a.PMDMapped += b.PMDMapped
	a.KSM += b.KSM
	a.Mlocked += b.Mlocked
	a.Zero += b.Zero
	a.HugeZero += b.HugeZero
	a.Hugetlb += b.Hugetlb
	a.File += b.File
	a.Exclusive += b.Exclusive
	a.Shared += b.Shared
}
