package checker

import "github.com/forkfuzz/forkfuzz/internal/oracle"

// Oracle names the rule a finding breaks: a row of the oracle table
// (internal/oracle), which the checker, the judge, the targets' events
// and the gate all read. Every finding on every target carries one; the
// judge (checker/judge) adds the oracles of target events (executor
// crashes and hangs, kernel reports).
type Oracle = oracle.Name

// Oracles of the checker (the table's Checker class). Adding one: a row
// in internal/oracle, then "Adding an oracle" in the package doc (doc.go).
const (
	OracleSnapshot        = oracle.Snapshot
	OracleIsolation       = oracle.Isolation
	OracleShared          = oracle.Shared
	OracleMemory          = oracle.Memory
	OracleMapping         = oracle.Mapping
	OracleErrno           = oracle.Errno
	OracleSkipped         = oracle.Skipped
	OracleChildExit       = oracle.ChildExit
	OracleMissingView     = oracle.MissingView
	OracleUnexpectedView  = oracle.UnexpectedView
	OracleCrash           = oracle.Crash
	OracleObservation     = oracle.Observation
	OraclePipe            = oracle.Pipe
	OracleLinearizability = oracle.Linearizability
	OracleLinUnknown      = oracle.LinUnknown
	OracleRollback        = oracle.Rollback
	OraclePageTable       = oracle.PageTable
)

// Oracles lists the checker's oracles in the table's order.
var Oracles = oracle.Of(oracle.Checker)
