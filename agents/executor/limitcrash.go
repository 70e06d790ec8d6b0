package executor

import (
	"fmt"
	"strings"
)

// LimitCrashError reports that the executor died because the Go runtime
// could not get memory while the executor's own oom_memcg limit was armed
// (memcg_quiet.go): the harness's trouble, not the kernel's. It is a
// harness failure, not an Event: the program is not judged, and the
// caller counts it (agents.Target).
type LimitCrashError struct {
	Fatal  string // the runtime's fatal error, with the line before it
	Status string // how the process ended
	Stderr string
}

func (e *LimitCrashError) Error() string {
	return fmt.Sprintf("executor died of the harness's own memory limit, not of the kernel: the Go runtime could not get memory while an oom_memcg fork's limit was armed (%s; %s)", e.Fatal, e.Status)
}

// runtimeOOM are what the Go runtime's fatal errors say when it could not
// get memory or a thread from the kernel.
var runtimeOOM = []string{"out of memory", "cannot allocate memory", "newosproc", "failed to create new OS thread"}

// armedRuntimeOOM returns the Go runtime's fatal error (and the line
// before it) when the executor's standard error shows one about memory
// or threads written while a limit was armed: after a limitArmedMarker
// with no limitLiftedMarker between them. "" otherwise, also when the
// runtime died of memory with no limit armed (then the kernel may be to
// blame: a leaked charge, a limit not lifted).
func armedRuntimeOOM(stderr string) string {
	lines := strings.Split(stderr, "\n")
	armed := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, limitArmedMarker):
			armed = true
		case strings.HasPrefix(l, limitLiftedMarker):
			armed = false
		case strings.HasPrefix(l, "fatal error: "):
			if !armed || !containsAny(l, runtimeOOM) {
				return ""
			}
			if i > 0 && strings.HasPrefix(lines[i-1], "runtime: ") {
				return strings.TrimSpace(lines[i-1]) + " / " + strings.TrimSpace(l)
			}
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
