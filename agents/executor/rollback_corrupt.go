package executor

// Test-only corruptions of rollback measurements (split from failnth.go).

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// RollbackCorruptions are test-only corruptions of rollback measurements
// (Options.Corrupt, like Corruptions, which lists those that falsify views
// and apply to any program with a fork); they need a program whose
// observation has a rollback measurement (fail_nth, oom_memcg or kill).
var RollbackCorruptions = map[string]string{
	"rollback-fault-storm": "the first rollback measurement's write pass reports three faults per page",
	"rollback-pmd-rw":      "the first rollback measurement shows its first PTE-table PMD write-protected after the fork",
	"rollback-write-hang":  "before the write pass after a fork, writes to the first page of the first anonymous private region are blocked with a userfaultfd write-protection nobody resolves: the pass hangs (tests the watchdog)",
}

// corruptRollback applies the test-only rollback corruptions; ok is false
// for other names.
func corruptRollback(o *obs.Observation, name string) (ok bool, err error) {
	switch name {
	case "rollback-write-hang":
		return true, nil // acted during the run (trapFirstPage)
	case "rollback-fault-storm":
		if len(o.Rollbacks) == 0 {
			return true, fmt.Errorf("corruption %s: no rollback measurement (use fail_nth, oom_memcg or kill)", name)
		}
		rb := &o.Rollbacks[0]
		rb.Faults = 3*int64(rb.WritePages) + 100
		return true, nil
	case "rollback-pmd-rw":
		for i := range o.Rollbacks {
			for j := range o.Rollbacks[i].PMDAfter {
				if e := &o.Rollbacks[i].PMDAfter[j]; e.Present && !e.Huge && e.RW {
					e.RW = false
					return true, nil
				}
			}
		}
		return true, fmt.Errorf("corruption %s: no PTE-table PMD in a rollback measurement (is the forkfuzz_pmd module loaded?)", name)
	}
	return false, nil
}
