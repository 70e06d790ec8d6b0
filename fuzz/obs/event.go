package obs

import (
	"encoding/json"
	"fmt"
)

// EventKind says what a harness-level event is. Every producer (the
// executor, its children's record stream, the QEMU target, the simulated
// kernel) records facts with a kind, never as free text to be matched
// later; the checker owns the oracles that read them (checker.Check).
type EventKind string

// Event kinds. Adding one: give it a line here, a row in eventKinds, and a
// case in checker's event rules (checker/events.go), which a test holds to
// every kind.
const (
	// EvNote is a remark with no judgement attached (also what an old
	// observation's free-text event decodes to).
	EvNote EventKind = "note"
	// EvMainFault: the executor's main process took a fault running an
	// operation (Op, -1 if unknown).
	EvMainFault EventKind = "main-fault"
	// EvChildFault: a forked child could not run operation Op (Errno).
	EvChildFault EventKind = "child-fault"
	// EvThreadFault: thread Thread faulted running Op (memory changed under it).
	EvThreadFault EventKind = "thread-fault"
	// EvViewOverrun: a view of Proc hit its word cap (Count words); extra words dropped.
	EvViewOverrun EventKind = "view-overrun"
	// EvViewUnfinished: a view of Proc at At was never finished.
	EvViewUnfinished EventKind = "view-unfinished"
	// EvInjectNotApplied: fork Fork's fault injection (fail_nth or
	// oom_memcg) could not be set up; the fork ran without it.
	EvInjectNotApplied EventKind = "inject-not-applied"
	// EvMeasureUnavailable: a rollback measurement (the write-pass
	// watchdog, the write trap) could not be set up.
	EvMeasureUnavailable EventKind = "measure-unavailable"
	// EvInjectedForkFail: an injected allocation failure made fork Fork
	// fail in the fork path (the simulated kernel says so; the model does
	// not predict it).
	EvInjectedForkFail EventKind = "injected-fork-fail"
	// EvInjectedCopyFail: an injected allocation failure in fork Fork's
	// background copy (Async-fork): the child is killed.
	EvInjectedCopyFail EventKind = "injected-copy-fail"
	// EvPMDRWNotRestored: after fork Fork finished or failed, a parent PMD
	// is still write-protected (read from the page tables).
	EvPMDRWNotRestored EventKind = "pmd-rw-not-restored"
	// EvWriteFaultHang: a write fault would loop forever (its PMD is
	// write-protected and no copy is in flight).
	EvWriteFaultHang EventKind = "write-fault-hang"
	// EvPageTableError: another page-table invariant broke (a failed
	// allocation in a fault, a shared table that could not be broken).
	EvPageTableError EventKind = "pagetable-error"
)

// EventKinds lists every kind, in a fixed order.
var EventKinds = []EventKind{
	EvNote, EvMainFault, EvChildFault, EvThreadFault, EvViewOverrun, EvViewUnfinished,
	EvInjectNotApplied, EvMeasureUnavailable, EvInjectedForkFail, EvInjectedCopyFail,
	EvPMDRWNotRestored, EvWriteFaultHang, EvPageTableError,
}

// NumEventKinds is len(EventKinds).
const NumEventKinds = 13

// Event is one harness-level fact about a run. Fields that do not apply
// are -1 (Fork, Op, Proc, Thread) or 0.
type Event struct {
	Kind   EventKind `json:"kind"`
	Fork   int       `json:"fork"`
	Op     int       `json:"op"`
	Proc   int       `json:"proc"`
	Thread int       `json:"thread"`
	Errno  int       `json:"errno,omitempty"`
	Count  int       `json:"count,omitempty"`
	// Text says what happened in words, for people; nothing parses it.
	Text string `json:"text"`
}

// NewEvent returns an event of kind k with no fork, op, process or thread,
// and the formatted text.
func NewEvent(k EventKind, format string, args ...any) Event {
	return Event{Kind: k, Fork: -1, Op: -1, Proc: -1, Thread: -1, Text: fmt.Sprintf(format, args...)}
}

// ForkEvent is NewEvent for fork f.
func ForkEvent(k EventKind, f int, format string, args ...any) Event {
	e := NewEvent(k, format, args...)
	e.Fork = f
	return e
}

func (e Event) String() string { return string(e.Kind) + ": " + e.Text }

// UnmarshalJSON reads an event object, or the free-text string that
// observations before typed events carried (it becomes an EvNote).
func (e *Event) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*e = NewEvent(EvNote, "%s", s)
		return nil
	}
	type plain Event
	p := plain{Fork: -1, Op: -1, Proc: -1, Thread: -1}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = Event(p)
	if !e.Kind.Valid() {
		return fmt.Errorf("unknown event kind %q", e.Kind)
	}
	return nil
}

// Valid reports whether k is one of EventKinds.
func (k EventKind) Valid() bool {
	for _, x := range EventKinds {
		if x == k {
			return true
		}
	}
	return false
}
