package executor

import "fmt"

// Which operations of a forked child get a bigger KCOV buffer (grow)
// than its own kcovChildWords entries (Options.ChildKcovGrow).
const (
	// GrowAll: a fork (kcovForkWords), a long system call or an
	// operation on a region that may hold THP (kcovGrownWords, bigOp),
	// and every operation after the buffer filled.
	GrowAll = "all"
	// GrowOps: as GrowAll except forks. A child's fork copies the page
	// tables of the executor the child inherited, the code the main
	// process's forks record too; it keeps its first kcovChildWords PCs
	// and the result notes the overflow.
	GrowOps = "ops"
	// GrowNone: never; every operation of a child keeps the first
	// kcovChildWords PCs it records.
	GrowNone = "none"
	// DefaultChildKcovGrow is the policy of a run that names none. A
	// grow allocates, zeroes and maps a kcov buffer of 8 or 32 MiB in the
	// child and frees it at the child's exit, a large part of what KCOV
	// costs a program under TCG, for no more edges (`forkfuzz bench exec`
	// shows both; docs/throughput.md).
	DefaultChildKcovGrow = GrowNone
)

// childGrow is a parsed Options.ChildKcovGrow.
type childGrow uint8

const (
	growAll childGrow = iota
	growOps
	growNone
)

func parseChildGrow(s string) (childGrow, error) {
	if s == "" {
		s = DefaultChildKcovGrow
	}
	switch s {
	case GrowAll:
		return growAll, nil
	case GrowOps:
		return growOps, nil
	case GrowNone:
		return growNone, nil
	}
	return 0, fmt.Errorf("child_kcov_grow %q: want %q, %q or %q", s, GrowAll, GrowOps, GrowNone)
}

// setGrow sets the current program's policy (after begin) from an
// Options.ChildKcovGrow that Executor.Run has checked.
func (k *kcovState) setGrow(policy string) {
	if g, err := parseChildGrow(policy); k != nil && err == nil {
		k.growPolicy = g
	}
}
