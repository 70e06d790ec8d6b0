package executor

// Where a fail-nth fault hit: the kernel log's fault-injection report,
// read back from /dev/kmsg (split from failnth.go).

import (
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// kmsgOpen opens the kernel log positioned at its end, or returns -1.
func kmsgOpen() int {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	if _, err := unix.Seek(fd, 0, 2); err != nil { // SEEK_END
		unix.Close(fd)
		return -1
	}
	return fd
}

// kmsgSite reads the kernel log records written since kmsgOpen and
// returns where fault injection struck: the fault attribute's name and the
// first frames of the stack trace that are not fault-injection or
// allocator plumbing, innermost first, e.g. "failslab: vm_area_dup <-
// dup_mmap <- copy_process <- kernel_clone". "" if the log says nothing.
func kmsgSite(fd int) string { return ParseFaultSite(kmsgReport(fd)) }

// kmsgReport is kmsgLines, read again while the last fault-injection
// report's stack is still being written (stackPending): a fault in
// another task (an Async-fork child copying) may still be printing its
// stack when the executor reads, and a site without frames reads as
// another site. At most stackWait more, only when a stack is pending.
func kmsgReport(fd int) []string {
	return readReport(func() []string { return kmsgLines(fd) }, time.Sleep)
}

// stackWait bounds how long readReport waits for a pending stack.
const stackWait = 100 * time.Millisecond

// readReport reads lines with read until no stack is pending or
// stackWait has passed, in steps of a fiftieth of it.
func readReport(read func() []string, sleep func(time.Duration)) []string {
	lines := read()
	step := stackWait / 50
	for waited := time.Duration(0); waited < stackWait && stackPending(lines); waited += step {
		sleep(step)
		lines = append(lines, read()...)
	}
	return lines
}

// stackPending: the last fault-injection (or OOM-killer) report in lines
// has begun and its stack has not ended ("</TASK>": dump_stack's last
// line, also after an IRQ stack).
func stackPending(lines []string) bool {
	start := reportStart(lines)
	if start < 0 {
		return false
	}
	for _, l := range lines[start+1:] {
		if strings.TrimSpace(l) == "</TASK>" {
			return false
		}
	}
	return true
}

// kmsgLines reads the kernel log records written since kmsgOpen, one
// line per message line.
func kmsgLines(fd int) []string {
	var lines []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EPIPE {
			continue // records were overwritten; go on with the next
		}
		if err != nil || n <= 0 {
			break
		}
		rec := string(buf[:n])
		if i := strings.IndexByte(rec, ';'); i >= 0 {
			rec = rec[i+1:]
		}
		rec, _, _ = strings.Cut(rec, "\n") // dictionary lines follow
		// /dev/kmsg escapes newlines inside a message as \x0a.
		lines = append(lines, strings.Split(rec, `\x0a`)...)
	}
	return lines
}

// FaultPlumbing are frames of the fault-injection and allocation machinery, not
// the site that asked for memory.
var FaultPlumbing = []string{"dump_stack", "should_fail", "fail_dump", "should_failslab", "__should_failslab",
	"should_fail_alloc_page", "__should_fail_alloc_page", "slab_pre_alloc_hook", "kmem_cache_alloc", "__kmem_cache_alloc",
	"kmalloc", "__kmalloc", "kmalloc_trace", "__alloc_pages", "alloc_pages", "get_page_from_freelist", "prepare_alloc_pages",
	"__get_free_pages", "get_zeroed_page", "kmem_cache_zalloc", "kzalloc", "slab_alloc", "__slab_alloc", "___slab_alloc",
	"allocate_slab", "new_slab", "alloc_slab_page", "__alloc_pages_node", "alloc_pages_node", "__folio_alloc", "folio_alloc",
	"vma_alloc_folio", "alloc_pages_vma", "kmem_cache_alloc_node", "__kmalloc_node", "kvmalloc_node", "mas_alloc_nodes",
	"kmem_cache_alloc_bulk", "__kmem_cache_alloc_bulk", "mas_node_count_gfp"}

// ParseFaultSite finds the last fault-injection report in kernel log
// lines and summarizes it (see kmsgSite).
func ParseFaultSite(lines []string) string {
	start := reportStart(lines)
	if start < 0 {
		return ""
	}
	name := "fault"
	if strings.Contains(lines[start], "invoked oom-killer") {
		name = "oom-killer"
	}
	var frames []string
	trace := false
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(t, "name "); ok && name == "fault" {
			name, _, _ = strings.Cut(rest, ",")
			continue
		}
		if strings.HasPrefix(t, "Call Trace:") {
			trace = true
			continue
		}
		if !trace || t == "<TASK>" {
			continue
		}
		if t == "</TASK>" || strings.HasPrefix(t, "FAULT_INJECTION") || strings.HasPrefix(t, "entry_SYSCALL") || strings.HasPrefix(t, "do_syscall") {
			break
		}
		if strings.HasPrefix(t, "? ") {
			continue // an unreliable frame
		}
		fn, _, ok := strings.Cut(t, "+0x")
		if !ok || strings.ContainsAny(fn, " :") {
			continue
		}
		skip := false
		for _, p := range FaultPlumbing {
			if strings.HasPrefix(fn, p) {
				skip = true
			}
		}
		if !skip && len(frames) < 6 {
			frames = append(frames, fn)
		}
	}
	if len(frames) == 0 {
		return name
	}
	return name + ": " + strings.Join(frames, " <- ")
}

// copyFrames are frames of a child's page-table copy: Async-fork's
// (mm/async_fork.c, called from schedule_tail) and the shared copy code
// it calls.
var copyFrames = []string{"async_fork_cpr_rest", "async_fork_copy_vma", "copy_page_range_slow", "async_fork_"}

// FaultPhase says whose stack the last fault-injection report in kernel
// log lines was taken on, for a fault injected into the child pid:
// obs.PhaseCopy (the child, inside Async-fork's copy), obs.PhaseChild
// (the child, elsewhere), obs.PhaseOther (another task: the "CPU: N PID:
// P" line of the report names another pid), "" (no report).
func FaultPhase(lines []string, pid int) string {
	start := reportStart(lines)
	if start < 0 {
		return ""
	}
	phase := obs.PhaseChild
	for _, l := range lines[start+1:] {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "FAULT_INJECTION") || strings.Contains(t, "invoked oom-killer") || t == "</TASK>" {
			break
		}
		if i := strings.Index(t, "PID: "); i >= 0 && strings.HasPrefix(t, "CPU: ") {
			f := strings.Fields(t[i+len("PID: "):])
			if len(f) > 0 && f[0] != strconv.Itoa(pid) {
				return obs.PhaseOther
			}
		}
		for _, c := range copyFrames {
			if strings.HasPrefix(t, c) {
				phase = obs.PhaseCopy
			}
		}
	}
	return phase
}

// reportStart is the line of the last fault-injection report, or of the
// last OOM-killer report (child_oom: "P invoked oom-killer: ..." with a
// stack trace), in kernel log lines; -1 if none.
func reportStart(lines []string) int {
	start := -1
	for i, l := range lines {
		if strings.Contains(l, "FAULT_INJECTION: forcing a failure") || strings.Contains(l, "invoked oom-killer:") {
			start = i
		}
	}
	return start
}
