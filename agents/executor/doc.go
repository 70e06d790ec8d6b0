// Package executor runs forkfuzz programs with real system calls and
// reports what every process saw (an obs.Observation). It is the only code
// in forkfuzz that forks and touches raw memory; it runs in a process of its
// own, started and spoken to through hashicorp/go-plugin (Remote, Serve), so
// a crash, hang or OOM kill of the executor is an event for the caller, who
// restarts it.
//
// # Forking a multi-threaded Go process
//
// After fork() only the calling thread exists in the child; every lock held
// by another thread of the Go runtime (heap, scheduler, GC) stays locked
// forever, so the child must not enter the runtime at all. The executor's
// children therefore run a tiny, runtime-free subset of Go:
//
//   - Programs run on one dedicated goroutine locked to its OS thread. Its
//     stack is grown to 4 MiB up front (growStack), and the executor process
//     runs with GODEBUG=gcshrinkstackoff=1 so the collector never shrinks
//     (moves) it: children recurse on this stack and never reach a
//     stack-growth check.
//   - The fork itself is a raw clone(SIGCHLD) in assembly (rawFork). In the
//     child it resets the goroutine's stack guard, so a preemption request
//     that the parent's sysmon had posted at the instant of fork cannot send
//     the child's next function prologue into the scheduler. All signals are
//     blocked on the forking thread around the fork, and stay blocked in the
//     child (a synchronous fault still kills the child, which its parent
//     sees in the wait status).
//   - Code reachable from a child allocates nothing, writes no Go pointers
//     (a GC write barrier may be on in the copied runtime state), uses no
//     maps, interfaces, defer, fmt or panics, and makes only raw system calls
//     (child_sys.go, sys_linux_amd64.s). All of its state lives in one machine
//     struct with fixed-size arrays, allocated before the program starts.
//   - Memory is read and written with plain loads and stores in assembly
//     (load64, store64, copyPage): the child reads its own memory from user
//     space, through its own page tables, as Redis's BGSAVE child would;
//     nothing goes through get_user_pages.
//   - Children report through a MAP_SHARED report buffer, appending
//     fixed-size records with an atomic counter (obs/wire.go); the executor
//     decodes it when the program ends. A child is released by a futex on a
//     shared word and, before that, sits blocked in user space; it dies with
//     its parent thread (PR_SET_PDEATHSIG).
//
// TestForkUnderGC forks hundreds of times while other goroutines keep the
// collector busy, to check that this holds.
//
// # Child code is marked and checked
//
// Every function a forked child may run carries the directive
//
//	//forkfuzz:childsafe
//
// on the line before its func keyword. A function that returns twice,
// like fork(2) (rawFork, rawForkInjected, rawClone3, forkIntoGroup),
// carries //forkfuzz:fork as well, and every call of it is a fork site of
// one shape: `pid, errno := rawFork()` followed by `if ... pid == 0 {
// entry(...) }`, where entry is a marked function that never returns
// (it ends in sysExit). A statement of child code that never runs in a
// child for a reason the code does not show (the program validator
// forbids it) carries //forkfuzz:hostonly <why>; code behind
// !m.inChild needs no annotation.
//
// TestChildSafe (internal/childsafe, go/ast and go/types) starts at the
// entries of every fork site, follows static calls, and fails when a
// reachable function is not marked, or a marked one allocates, appends,
// uses a map, an interface, a channel, defer, go, panic, a closure or a
// function value, concatenates strings, stores a Go pointer outside a
// local variable, or calls anything but marked functions, sync/atomic and
// the module's packages (whose functions it checks by the same rules). A
// violation would otherwise show only as a child that deadlocks now and
// then, and an executor hang much later. The rule cannot see what the
// compiler adds (bounds and nil checks, stack checks): children index
// within bounds and run on the pre-grown stack.
//
// # What a process knows about its memory
//
// The executor does not track page protections itself: before a store and
// for every view it parses /proc/self/maps (without allocating) and derives
// each page's state from the kernel's own answer: unmapped, no read access,
// beyond the end of its backing object (which would SIGBUS; sizes of the
// memfds and shmem objects the program created are known), or readable.
// docs/semantics.md is the exact contract with the reference model.
package executor
