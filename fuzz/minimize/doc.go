// Package minimize shrinks a forkfuzz program that reproduces a finding to
// a small program that still does.
//
// Minimize first runs delta debugging (ddmin) over op-units: a unit is one
// operation, or a whole fork with everything that belongs to it (its
// child's and descendants' operations, waits and kills), so every candidate
// is a valid program. It then checks every single unit once more until none
// can go, which makes the result 1-minimal: removing any one remaining unit
// stops it reproducing. Then come simplification passes, each kept only if
// the program still reproduces: replace a fork by its child's operations
// run in the forking process (flattening nesting), drop regions no
// operation uses (renumbering
// the rest), shrink region sizes, shrink store and pwrite slot counts,
// clear THP advice, and drop mremap flags. Removal and simplification
// repeat until neither changes anything, or the attempt budget runs out.
//
// Minimization is deterministic for a deterministic predicate; results are
// cached by program text, so no program is tried twice.
package minimize
