// Package checker judges what a forkfuzz program did (package prog) by
// what every process saw (package obs). Check is a pure function from
// (program, observation) to a Verdict; Expected is the same reference
// model run forwards, predicting a clean observation (a simulated target).
//
// # The model and the comparisons
//
// One reference model (type machine: model.go and the rule files) runs
// in both directions. Check gives it a comparer (compare.go): at every
// view and operation result the model reaches, the comparer reads the
// model's state and the observation and writes findings; after the run
// it judges what the model never reached (unmatched views, rollbacks,
// fork-implementation evidence, events, the threads' consistent cut).
// A comparer never changes the model (TestComparerReadsTheModel).
// Expected runs the model without one and writes its predictions.
//
// # The reference model
//
// The model replays the program in the order the executor runs it
// (docs/semantics.md): the main process runs its operations in program
// order; "wait fI" releases the child of fI, which takes its start view,
// runs all its operations (recursively waiting for its own children) and
// exits; then the parent continues. For every process it keeps:
//
//   - segments: runs of pages with identical attributes, the model's
//     VMAs: backing (anonymous private, shmem object, memfd shared or
//     private, with object and page offset), protection, MADV_DONTFORK,
//     MADV_WIPEONFORK, VM_LOCKED (yes, no or maybe), THP advice, and the
//     operation that created the mapping. Pages are numbered over the whole
//     arena, so mremap can move them between regions.
//   - private content: a sparse map from page to its non-zero words, for
//     anonymous private pages and for the private copies of memfd-private
//     pages (made on a write fault, or by populating a writable locked
//     mapping); pages are shared between processes after fork and copied on
//     write. A page may have several acceptable contents: after MADV_FREE
//     it is either its old content or zero until written (reclaim may drop
//     it at any time); a write applies to every alternative.
//
// Shared objects (the memfds and every shmem object an anonymous shared
// mapping creates) hold their own sparse content; a memfd-private page
// without a private copy shows the file's current content.
//
// Linux rules modelled (Linux 6.18 is the reference; the programs in
// corpus/regress document the less obvious ones, verified on a 6.18 host):
//
//   - fork: MADV_DONTFORK mappings are absent in the child; MADV_WIPEONFORK
//     mappings are present, zero-filled, still flagged; VM_LOCKED is not
//     inherited; private content is copied; shared mappings stay shared.
//   - store: the executor skips slots that /proc/self/maps shows not
//     writable or past the end of their object; the model counts them
//     (OpResult.Skipped) and applies the rest.
//   - mmap MAP_FIXED replaces the range with a fresh mapping of the
//     region's kind (a new shmem object of op.Len bytes for anon-shared);
//     munmap removes it.
//   - mprotect and mlock/munlock apply from the start VMA by VMA up to the
//     first hole (ENOMEM; a hole at the start changes nothing); madvise
//     skips holes (ENOMEM at the end) and stops at the first VMA that
//     rejects the advice. mlock then populates: ENOMEM on PROT_NONE or past
//     an object's end (the lock stays), and write faults give writable
//     memfd-private mappings private copies; mprotect(PROT_WRITE) of a
//     locked private mapping and mremap growth of a locked mapping populate
//     the same way.
//   - madvise: DONTNEED (EINVAL when locked) zeroes anonymous private
//     pages and drops private copies of memfd-private pages, leaving shared
//     pages alone; FREE (unlocked private anonymous only) adds the zero
//     alternative; WIPEONFORK only on private anonymous mappings;
//     PAGEOUT and COLD are EINVAL when locked; COLLAPSE never changes
//     content and its errno is not predicted.
//   - mremap follows mm/mremap.c of 6.18: parameter checks; MREMAP_FIXED
//     without resize moves every mapped piece of the range, leaving the
//     destination under holes alone; other forms need the source in one
//     VMA; growth in place or by moving (MAYMOVE), shrinking, old_len 0
//     duplicating shared mappings; MREMAP_DONTUNMAP leaves the source
//     mapped but empty (anonymous pages read zero, file and shared pages
//     refault from their object) and clears VM_LOCKED on the whole source
//     VMA. The observed errno and address decide what happened where the
//     kernel's choice is not predictable (a kernel-chosen address; mappings
//     moved out of the arena leave every view).
//   - pwrite writes the memfd; killed children never run and take no view.
//
// # Uncertainty
//
// The model never guesses. Where the outcome depends on something it
// cannot know it accepts every possibility: several acceptable errnos
// (kernel VMA boundaries depend on vma merging, so a boundary between
// segments with equal attributes is only "maybe"), several contents
// (MADV_FREE), or no judgement at all: after an operation whose result
// contradicts the prediction, or that did not run, the pages it may have
// changed become unknown to the process (any state and content accepted,
// inherited by its children), and a write the model cannot place makes it
// stop judging shared memory. Verdict.Stats says how much was judged.
//
// Threads of the main process (tN: operations) run concurrently: the words
// their stores can write are "wild" (any value) in the main process while
// they may still run and in every copy made meanwhile, their mapping
// changes make the ranges unknown, and the consistent-cut oracle
// (threads.go, package cut) judges the children's snapshots of those words.
//
// # Oracles
//
//   - snapshot: a child's start view equals its parent's memory at the fork
//     with the fork rules above, plus shared updates until its release.
//   - isolation: a value written after a fork, by another process, into
//     memory private to it or to the viewer, is visible (either direction,
//     any depth).
//   - shared: an update of shared memory (shmem, memfd, the file behind a
//     memfd-private page) is missing or wrong.
//   - memory: any other wrong word (a process's own writes, DONTNEED,
//     mremap moves).
//   - mapping: page states (unmapped, readable, no access, beyond EOF),
//     and VMA protections, sharing and file offsets, differ from the model.
//   - errno: an operation's errno differs from a certain prediction, an
//     address returned by mmap/mremap is wrong, or an operation that should
//     have run did not.
//   - skipped: a store skipped a different number of slots.
//   - child-exit: a child that was not killed must exit with status 0; a
//     killed child must show SIGKILL and never run.
//   - missing-view, unexpected-view: every start view of a released child,
//     every check and the main process's end view are present, nothing
//     else (unless the observation is truncated).
//   - crash: the executor's main process faulted (unless threads could be
//     changing its mappings at the time: that race is a note).
//   - linearizability: the consistent-cut oracle for thread stores.
//
// Package checker/hosttest runs programs through the real executor on the
// host kernel and requires clean verdicts: generated programs, the
// checker's own corner-case programs (internal/randprog), programs with
// threads, capped views, and corpus/regress.
//
// A Finding carries a Signature for deduplication (oracle, operation kinds
// and memory kind, never addresses or indexes) and an Explanation naming
// the view, fork, region, page, offset, expected and actual values and the
// operations that wrote them. A verdict keeps MaxPerGroup findings per
// oracle and view and counts the rest in Omitted.
//
// # Adding an oracle
//
//  1. A constant in oracle.go (Oracle...) and its row in Oracles.
//  2. The rule: emit Findings with that Oracle and a Signature starting
//     with its name ("name:kinds:memory", never addresses or indexes)
//     and an Explanation a kernel developer can act on.
//  3. If it reads a new kind of typed event (fuzz/obs Event), give the
//     event kind its rule (TestEveryEventKindHasARule fails otherwise).
//  4. A case in oracle_test.go: an observation that fires it, and the
//     oracle the judge names for it (checker/judge passes it through; a
//     target event's oracle comes from the event, agents.Event).
//  5. A line in the list above, and in the README if users see it.
//  6. Clean runs stay clean: go test ./checker/... ./agents/sim (the clean
//     models) and, where the host allows, ./checker/hosttest.
//
// # Adding an operation (the model's part)
//
// See the checklist in package fuzz/prog. Here: a case in machine.exec
// (model.go; pinned kinds in execPinned, pinned.go) that predicts its
// result (certain, or unpredictable with a reason) and applies its effect;
// taintOp for when it did not complete; threadOp if it may run on a
// thread; opSig for its signature. An operation kind or argument without a
// rule is noted as unhandled, which TestEveryOpKindModelled and
// TestEveryArgumentModelled catch.
package checker
