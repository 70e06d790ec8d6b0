// Package gen generates and mutates forkfuzz programs (package prog).
//
// Generate builds a random program from a seeded *rand.Rand and tunable
// Weights. Programs aim at fork bugs: a few regions of every kind (anonymous
// and memfd, private and shared, small and PMD-sized, THP on and off), stores
// before a fork near page, PMD and VMA boundaries, and right after a fork the
// operations that race with Async-fork's background copy or break
// On-demand-fork's shared PTE tables: parent stores, munmap, MAP_FIXED mmap,
// mprotect, madvise, mremap, mlock. Children store, check and fork again;
// some forks are killed right away; the parent sometimes forks again while an
// earlier child is still unwaited.
//
// Mutate derives a new program from an old one and a corpus. FromBytes turns
// arbitrary bytes into a program, for native and go-fuzz style fuzzing.
//
// The structural helpers (Units, Unit, RemoveOps, Repair) work on the flat
// operation list of a program, where a fork's "unit" is the fork operation,
// every operation of its child and of the child's descendants, and their
// waits and kills. Package minimize builds on them.
//
// Every program that Generate, Mutate, FromBytes and Repair return passes
// (*prog.Program).Validate.
package gen
