package executor

// What the caller can learn when the executor process dies, hangs or
// loses its connection: its standard error during the run, its exit
// status, and, when it is still alive, the state of its threads and
// memory (it is killed right after). A crash without this is
// undiagnosable: a broken go-plugin connection alone ("unexpected EOF")
// does not tell an OOM kill from an exit or an executor still running.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// tailBuffer keeps the last max bytes written to it (and passes every
// write on to next, if set).
type tailBuffer struct {
	mu   sync.Mutex
	buf  []byte
	max  int
	next interface{ Write([]byte) (int, error) }
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	t.mu.Unlock()
	if t.next != nil {
		t.next.Write(b)
	}
	return len(b), nil
}

// take returns what was written since the last take.
func (t *tailBuffer) take() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	t.buf = t.buf[:0]
	return s
}

// processState describes a live process from /proc: its memory, and per
// thread its state, wait channel and kernel stack (readable as root),
// plus the system's memory. It never fails: what cannot be read is said.
func processState(pid int) string {
	var b strings.Builder
	dir := fmt.Sprintf("/proc/%d", pid)
	if st, err := os.ReadFile(dir + "/status"); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			for _, k := range []string{"State:", "VmPeak:", "VmSize:", "VmHWM:", "VmRSS:", "RssAnon:", "VmPTE:", "Threads:", "SigBlk:", "voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if strings.HasPrefix(l, k) {
					fmt.Fprintf(&b, "%s\n", strings.Join(strings.Fields(l), " "))
				}
			}
		}
	} else {
		fmt.Fprintf(&b, "%s/status: %v\n", dir, err)
	}
	tasks, _ := filepath.Glob(dir + "/task/*")
	sort.Strings(tasks)
	for _, t := range tasks {
		stat, _ := os.ReadFile(t + "/stat")
		state := "?"
		if s := string(stat); strings.LastIndexByte(s, ')') > 0 {
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 {
				state = f[0]
			}
		}
		wchan, _ := os.ReadFile(t + "/wchan")
		fmt.Fprintf(&b, "thread %s: state %s, wchan %s\n", filepath.Base(t), state, strings.TrimSpace(string(wchan)))
		if stack, err := os.ReadFile(t + "/stack"); err == nil && len(stack) > 0 {
			for _, l := range strings.Split(strings.TrimSpace(string(stack)), "\n") {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	if mi, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			for _, k := range []string{"MemTotal:", "MemFree:", "MemAvailable:", "Shmem:", "AnonPages:", "PageTables:"} {
				if strings.HasPrefix(l, k) {
					fmt.Fprintf(&b, "system %s\n", strings.Join(strings.Fields(l), " "))
				}
			}
		}
	}
	return b.String()
}
