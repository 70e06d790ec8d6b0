// Package sim is a simulated kernel: a user-space model of Linux memory
// management with three fork implementations (eager copy, On-demand-fork,
// Async-fork) and a catalogue of injectable bugs ("mutants"). It runs
// forkfuzz programs (package prog) deterministically and fast, produces
// observations with exactly the executor's shape (docs/semantics.md), and
// exposes its page tables so the rollback oracle can read PMD RW bits.
//
// # Model
//
// An MM is an address space: a sorted VMA list and x86-64-like page
// tables, PGD -> PUD -> PMD -> PTE, 512 entries each, 4 KiB pages and
// 2 MiB huge PMDs (anonymous private areas with MADV_HUGEPAGE get a huge
// page on their first write fault, as the host's THP "madvise" mode does).
// Physical pages carry a reference count (anonymous pages) or belong to a
// File's page cache (memfds and the shmem objects behind anonymous shared
// mappings). Write faults do copy-on-write; reads never fault: a view
// walks the page tables and falls back to the file or to zero, which is
// what a read fault would map. Views, stores and errno values come from
// these structures only, so a mutant shows up as wrong content.
//
// # Fork implementations
//
//   - Eager (fork.go): dup_mmap. Copy every level; write-protect private
//     PTEs on both sides; share huge PMDs; skip MADV_DONTFORK areas; leave
//     MADV_WIPEONFORK areas empty; copy page tables only of VMAs with
//     anonymous pages (vma_needs_copy).
//   - OnDemand (fork.go): upper levels copied; last-level PTE tables
//     shared with a reference count (PTETable.Ref) and both PMD entries
//     write-protected. Any write or change under a shared table "breaks"
//     it (MM.breakTable): take it back if Ref is 1, else copy it (taking
//     page references, write-protecting private PTEs). Tables next to
//     don't-fork / wipe-on-fork areas are copied at fork.
//   - Async (async.go): the fast path duplicates VMAs, copies PGD/PUD and
//     clears the RW bit of every parent PMD under a VMA that needs copying
//     (RW clear = "not copied yet"). The child's copier (asyncCopy) then
//     copies PMD by PMD, in four steps per PMD (lock and check RW, first
//     half, second half, set RW and unlock), interleaved with the parent
//     by the scheduler (Kernel.preempt, seeded by Config.SchedSeed: before
//     every operation and every store slot). The parent synchronizes
//     proactively: a write fault under a write-protected PMD copies that
//     PMD and its 512 PTEs (syncPMD); mmap over a VMA, munmap, mprotect,
//     madvise, mremap, mlock/munlock first copy every pending PMD of every
//     VMA they touch (syncVMAs); a nested fork first completes the running
//     copy. A child runs user code only after its copy completes. When a
//     copy ends (done, failed or aborted by SIGKILL) every parent PMD still
//     write-protected gets RW back; on an allocation failure in the fast
//     path fork fails with ENOMEM, in the copier or a sync the child is
//     killed (wait status SIGKILL).
//
// # Concurrency and lock order
//
// Everything runs on the caller's goroutine; "threads" (user processes,
// the main process's storeloop threads, Async-fork copiers) are
// interleaved explicitly, so every interleaving replays from its seed.
// The locks are modelled where their absence is a bug:
//
//	mmap lock of the parent mm   (write: VMA changes and fork; read: faults, one copier step)
//	  -> PTE-table lock (PTETable.lockedBy)
//
// The copier holds the parent's mmap read lock for one PMD at a time, so a
// VMA-level change (mmap write lock) first lets the copier finish the PMD
// it is in. A parent write fault that finds the copier holding the table
// lock waits for it (the scheduler runs the copier until it unlocks) and
// then re-checks the RW bit, so a table is never copied twice or half.
//
// Invariants (checked by the oracles; mutants break them):
//   - A PTE-table PMD entry of a parent has RW clear only while an
//     Async-fork copy for that parent is in flight (Kernel.checkPMDs runs
//     when a copy retires and at the end: violations become events
//     "sim: pmd-rw: ...").
//   - Under On-demand-fork, PMDRW is clear exactly on entries whose table
//     has Ref > 1 or was shared and not yet taken back.
//   - An anonymous page's ref equals the number of PTEs and huge PMDs
//     mapping it (the lock mutant breaks this by double copies, which is
//     realistic: it leaks).
//   - A private mapping never maps a page-cache page: its PTEs hold
//     anonymous copies (PTEAnon) or nothing.
//
// # Allocation failures
//
// Config.FailNth / FailRate make the n-th page-table or VMA allocation of a
// fork fail (counted from the fork call, through the copier and the
// parent's syncs), the simulated kernel's fail-nth. Observations then carry
// injected-fork-fail / injected-copy-fail events naming the fork; the checker
// excuses exactly the fork's ENOMEM and the killed child, and judges
// everything else.
//
// # Simplifications (all keep programs valid and contents exact)
//
//   - Reads do not install PTEs; MADV_FREE keeps contents (no memory
//     pressure); MADV_PAGEOUT/COLD change nothing visible; MADV_COLLAPSE
//     answers as the host does but leaves page tables alone; khugepaged
//     never runs; mlock has no limit (root).
//   - Kernel-chosen mremap addresses are placed top-down below
//     0x7f0000000000, outside every view.
//   - storeloop threads write one pass when started and another, with
//     probability 1/2, at each scheduling point of the main thread until
//     the wait of their fork; thread stores are logged with a virtual TSC.
package sim
