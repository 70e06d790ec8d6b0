package checker

// Oracle names the rule a finding breaks. Every finding on every target
// carries one of these; the judge (checker/judge) adds the oracles of
// target events (executor crashes and hangs, kernel reports), which are
// named by the event itself.
type Oracle string

// Oracles of the checker. Adding one: see "Adding an oracle" in the
// package doc (doc.go).
const (
	OracleSnapshot        Oracle = "snapshot"        // a child's start view differs from the parent at fork
	OracleIsolation       Oracle = "isolation"       // a write crossed between parent and child private memory
	OracleShared          Oracle = "shared"          // a MAP_SHARED write was not seen where it must be
	OracleMemory          Oracle = "memory"          // a process's own memory differs from the model
	OracleMapping         Oracle = "mapping"         // readable/writable/mapped state differs from the model
	OracleErrno           Oracle = "errno"           // an operation returned another result than Linux's
	OracleSkipped         Oracle = "skipped"         // the executor skipped an operation the model expected to run
	OracleChildExit       Oracle = "child-exit"      // a child ended otherwise than expected
	OracleMissingView     Oracle = "missing-view"    // a view the program takes is absent
	OracleUnexpectedView  Oracle = "unexpected-view" // a view no process should have taken is present
	OracleCrash           Oracle = "crash"           // the executor's main process took a fault
	OracleObservation     Oracle = "observation"     // the observation itself is malformed or impossible
	OraclePipe            Oracle = "pipe"            // a pipe showed what vmsplice never put in it
	OracleLinearizability Oracle = "linearizability" // a child snapshot is not a consistent cut of thread stores
	OracleLinUnknown      Oracle = "linearizability-unknown"
	OracleRollback        Oracle = "rollback"  // a failed fork did not leave the parent as it was
	OraclePageTable       Oracle = "pagetable" // page-table invariants (PMD RW restored, no endless write fault)
)

// Oracles lists the checker's oracles in a fixed order.
var Oracles = []Oracle{
	OracleSnapshot, OracleIsolation, OracleShared, OracleMemory, OracleMapping, OracleErrno,
	OracleSkipped, OracleChildExit, OracleMissingView, OracleUnexpectedView, OracleCrash,
	OracleObservation, OraclePipe, OracleLinearizability, OracleLinUnknown, OracleRollback,
	OraclePageTable,
}
