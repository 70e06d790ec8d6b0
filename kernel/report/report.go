// Package report finds kernel reports (BUG, WARNING, Oops, KASAN, panic,
// "Bad rss-counter", page table check, hung task, RCU stall, soft lockup) in
// a kernel console log and gives each a short, stable title, in the manner
// of syzkaller's pkg/report: the title names the kind of report and, where
// the log shows it, the function it happened in ("WARNING in
// copy_pte_range"), never addresses or PIDs, so titles deduplicate.
//
// It is tested against real console logs kept in testdata/ (see
// testdata/README); go test -update rewrites the expected titles.
package report

import (
	"bytes"
	"regexp"
	"strings"
)

// Kind classifies a report.
type Kind string

const (
	Panic   Kind = "panic"   // the kernel stopped: Kernel panic - not syncing
	Bug     Kind = "bug"     // BUG:, kernel BUG at, Oops, general protection fault
	Warning Kind = "warning" // WARNING: (the kernel keeps running)
	KASAN   Kind = "kasan"   // KASAN/KFENCE/UBSAN reports
	// RSS: the mm accounting check_mm does when an mm is freed ("BUG:
	// Bad rss-counter state", "BUG: non-zero pgtables_bytes on freeing
	// mm"); the kernel keeps running.
	RSS       Kind = "rss-counter"
	PageTable Kind = "page-table-check"
	Hang      Kind = "hang" // hung task, RCU stall, soft/hard lockup
)

// Report is one kernel report found in a console log.
type Report struct {
	Title string
	Kind  Kind
	// Start and End delimit the report in the log (byte offsets); Text is
	// that part of the log.
	Start, End int
	Text       string
	// Fatal: the kernel cannot continue after this report (panic, Oops
	// with panic_on_oops, ...): the VM will stop or reboot.
	Fatal bool
	// Oops: the report carries the line die() prints ("Oops: 0002
	// [#1]", "invalid opcode: 0000 [#1]", "general protection fault,
	// ...: 0000 [#1]"; a BUG_ON, a bad kernel access): the kernel killed the task that hit
	// it, possibly holding locks (mmap_lock, a page lock) that others
	// of the program now wait for. A program that meets one may never
	// answer; the host need not wait out its timeouts.
	Oops bool
}

// KillsTask reports whether the task that hit r died or the kernel
// stopped (r.Oops, r.Fatal, or a panic).
func (r *Report) KillsTask() bool {
	return r.Oops || r.Fatal || r.Kind == Panic
}

type pattern struct {
	re    *regexp.Regexp
	kind  Kind
	title func(m []string, body []string) string
	fatal bool
}

var (
	ripRe   = regexp.MustCompile(`RIP: [0-9a-f]{4}:(?:\[<[0-9a-f]+>\] )?([A-Za-z0-9_.]+)\+0x`)
	frameRe = regexp.MustCompile(`^\s*(?:\[<[0-9a-f]+>\] )?(?:\? )?([A-Za-z0-9_.]+)\+0x[0-9a-f]+/0x[0-9a-f]+`)
	prefix  = regexp.MustCompile(`^(?:\[\s*[0-9]+\.[0-9]+\]\s*)?(?:\[\s*[CT][0-9]+\]\s*)?`)
)

// Functions that say nothing about where a report happened.
var skipFrames = map[string]bool{
	"dump_stack": true, "dump_stack_lvl": true, "show_stack": true, "panic": true,
	"__warn": true, "report_bug": true, "handle_bug": true, "exc_invalid_op": true,
	"asm_exc_invalid_op": true, "warn_slowpath_fmt": true, "__report_bad_rss": true,
	"print_report": true, "kasan_report": true, "check_mm": true,
	"__schedule": true, "schedule": true, "schedule_timeout": true, "schedule_preempt_disabled": true,
	"io_schedule": true, "rwsem_down_write_slowpath": true, "rwsem_down_read_slowpath": true,
	"__mutex_lock": true, "mutex_lock": true, "rcu_dump_cpu_stacks": true,
	"print_bad_pte": true, "print_bad_pte.cold": true, "bad_page": true, "bad_page.cold": true,
}

func inFunc(m []string, body []string) string {
	for _, l := range body {
		if r := ripRe.FindStringSubmatch(l); r != nil && !skipFrames[r[1]] {
			return " in " + r[1]
		}
	}
	trace := false
	for _, l := range body {
		if strings.Contains(l, "Call Trace:") {
			trace = true
			continue
		}
		if !trace {
			continue
		}
		if f := frameRe.FindStringSubmatch(l); f != nil && !skipFrames[f[1]] && !strings.HasPrefix(l, "?") && !strings.Contains(l, " ? ") {
			return " in " + f[1]
		}
	}
	return ""
}

func trimAddr(s string) string {
	s = regexp.MustCompile(`0x[0-9a-f]+|[0-9a-f]{8,}`).ReplaceAllString(s, "ADDR")
	s = regexp.MustCompile(`\b(?:pid|PID|CPU#?)[: ]*\d+`).ReplaceAllString(s, "")
	return strings.TrimSpace(strings.TrimRight(s, ":,! "))
}

var patterns = []pattern{
	{re: regexp.MustCompile(`^BUG: Bad rss-counter state`), kind: RSS,
		title: func([]string, []string) string { return "BUG: Bad rss-counter state" }},
	{re: regexp.MustCompile(`^BUG: non-zero pgtables_bytes on freeing mm`), kind: RSS,
		title: func([]string, []string) string { return "BUG: non-zero pgtables_bytes on freeing mm" }},
	{re: regexp.MustCompile(`^kernel BUG at mm/page_table_check\.c`), kind: PageTable, fatal: true,
		title: func(m, b []string) string { return "page table check: kernel BUG" + inFunc(m, b) }},
	{re: regexp.MustCompile(`^(?:BUG|WARNING): KASAN: ([a-z\-]+)`), kind: KASAN,
		title: func(m, b []string) string { return "KASAN: " + m[1] + inFunc(m, b) }},
	{re: regexp.MustCompile(`^(?:BUG|WARNING): (KFENCE|UBSAN): ([a-z\- ]+)`), kind: KASAN,
		title: func(m, b []string) string { return m[1] + ": " + strings.TrimSpace(m[2]) + inFunc(m, b) }},
	{re: regexp.MustCompile(`^INFO: task .* blocked for more than \d+ seconds`), kind: Hang,
		title: func(m, b []string) string { return "INFO: task hung" + inFunc(m, b) }},
	{re: regexp.MustCompile(`^(?:rcu: )?INFO: rcu_(?:sched|preempt|bh) (?:self-)?detected (?:expedited )?stalls?`), kind: Hang,
		title: func(m, b []string) string { return "INFO: rcu detected stall" + inFunc(m, b) }},
	{re: regexp.MustCompile(`^watchdog: BUG: soft lockup`), kind: Hang,
		title: func(m, b []string) string { return "BUG: soft lockup" + inFunc(m, b) }},
	{re: regexp.MustCompile(`^(?:NMI )?[Ww]atchdog: .*hard LOCKUP`), kind: Hang,
		title: func(m, b []string) string { return "BUG: hard lockup" + inFunc(m, b) }},
	// "BUG: Bad page map in process P  pte:... pmd:..." and "BUG: Bad
	// page state in process P  pfn:...": the process and the entries
	// differ from report to report; where the kernel found it does not.
	{re: regexp.MustCompile(`^BUG: Bad page (map|state)`), kind: Bug,
		title: func(m, b []string) string { return "BUG: Bad page " + m[1] + inFunc(m, b) }},
	// mm/swapfile.c: a swap entry whose slot is free or out of range
	// ("swap_info_get: Unused swap offset entry 00000c8f"): swap counts
	// are wrong, e.g. a copied entry that did not raise its count.
	{re: regexp.MustCompile(`^([a-z_]+): (Bad|Unused) swap (file|offset) entry`), kind: Bug,
		title: func(m, b []string) string { return m[2] + " swap " + m[3] + " entry in " + m[1] }},
	{re: regexp.MustCompile(`^kernel BUG at ([^:]+)`), kind: Bug, fatal: true,
		title: func(m, b []string) string { return "kernel BUG" + orAt(inFunc(m, b), m[1]) }},
	{re: regexp.MustCompile(`^BUG: (.*)`), kind: Bug,
		title: func(m, b []string) string {
			t := m[1]
			if i := strings.Index(t, ", address"); i >= 0 {
				t = t[:i]
			}
			return "BUG: " + trimAddr(t) + inFunc(m, b)
		}},
	{re: regexp.MustCompile(`^WARNING: CPU: \d+ PID: \d+ at (\S+) ([A-Za-z0-9_.]+)\+0x`), kind: Warning,
		title: func(m, b []string) string { return "WARNING in " + m[2] }},
	{re: regexp.MustCompile(`^WARNING: CPU: \d+ PID: \d+ at (\S+)`), kind: Warning,
		title: func(m, b []string) string { return "WARNING" + orAt(inFunc(m, b), m[1]) }},
	{re: regexp.MustCompile(`^WARNING: (.*)`), kind: Warning,
		title: func(m, b []string) string { return "WARNING: " + trimAddr(m[1]) }},
	{re: regexp.MustCompile(`^general protection fault`), kind: Bug,
		title: func(m, b []string) string { return "general protection fault" + inFunc(m, b) }},
	{re: regexp.MustCompile(`^Oops: (.*)`), kind: Bug,
		title: func(m, b []string) string { return "Oops" + inFunc(m, b) }},
	{re: regexp.MustCompile(`^Kernel panic - not syncing: (.*)`), kind: Panic, fatal: true,
		title: func(m, b []string) string { return "kernel panic: " + trimAddr(strings.TrimRight(m[1], " ]-")) }},
}

func orAt(in, file string) string {
	if in != "" {
		return in
	}
	if i := strings.LastIndex(file, ":"); i > 0 {
		file = file[:i]
	}
	return " at " + file
}

// suppressed matches the rate limiter's summary line ("BUG: Bad page map:
// 67421 messages suppressed", "foo: 3 callbacks suppressed").
var suppressed = regexp.MustCompile(`: \d+ (?:messages|callbacks) suppressed\s*$`)

// maxBody is how many lines after a report's first line belong to it.
const maxBody = 80

// Parse returns every report in a console log, in order. A report ends
// where the next one starts, at "---[ end trace", or after maxBody lines.
// A "Kernel panic" that follows another report within its body (panic on
// oops, sysrq crash) is part of that report and makes it fatal; the first
// report's title is kept.
func Parse(log []byte) []*Report {
	var reps []*Report
	var cur *Report
	var body []string
	var match pattern
	var m []string
	lastEnd, lastLine, lineNo := -1, -100, 0
	finish := func(end int) {
		if cur == nil {
			return
		}
		cur.End = end
		cur.Text = string(log[cur.Start:end])
		cur.Title = match.title(m, body)
		reps = append(reps, cur)
		cur = nil
		lastEnd, lastLine = end, lineNo
	}
	off := 0
	for off < len(log) {
		lineNo++
		nl := bytes.IndexByte(log[off:], '\n')
		end := len(log)
		if nl >= 0 {
			end = off + nl + 1
		}
		raw := strings.TrimRight(string(log[off:end]), "\r\n")
		line := raw[len(prefix.FindString(raw)):]
		var p pattern
		var mm []string
		if suppressed.MatchString(line) {
			// printk_ratelimit's "N messages suppressed" repeats a
			// report's first words with a count: it starts no report
			// (a title made from it would never deduplicate).
			if cur != nil {
				body = append(body, line)
			}
			off = end
			continue
		}
		for _, q := range patterns {
			if mm = q.re.FindStringSubmatch(line); mm != nil {
				p = q
				break
			}
		}
		switch {
		case mm != nil && cur != nil && (p.kind == Panic || isOops(line) || (p.kind == RSS && cur.Kind == RSS)):
			// A panic or Oops line that follows a report belongs to it.
			if p.kind == Panic {
				cur.Fatal = true
			}
			if dieRe.MatchString(line) {
				cur.Oops = true
			}
			body = append(body, line)
		case mm != nil && cur == nil && p.kind == Panic && len(reps) > 0 && lastEnd == off && lineNo-lastLine <= 10:
			fallthrough
		case mm != nil && cur == nil && p.kind == Panic && len(reps) > 0 && lineNo-lastLine <= 10 && reps[len(reps)-1].Kind != Panic:
			// "Kernel panic - not syncing: Fatal exception" right after
			// the end of a report: that report was fatal.
			r := reps[len(reps)-1]
			r.Fatal = true
			r.End = end
			r.Text = string(log[r.Start:end])
			lastEnd, lastLine = end, lineNo
		case mm != nil:
			finish(off)
			cur = &Report{Kind: p.kind, Start: off, Fatal: p.fatal, Oops: dieRe.MatchString(line)}
			match, m, body = p, mm, nil
		case cur != nil && cur.Kind == RSS:
			finish(off)
		case cur != nil:
			body = append(body, line)
			if dieRe.MatchString(line) {
				cur.Oops = true
			}
			if strings.Contains(line, "---[ end trace") || strings.Contains(line, "---[ end Kernel panic") || len(body) > maxBody {
				finish(end)
			}
		case len(reps) > 0 && lastEnd == off && strings.Contains(line, "---[ end Kernel panic"):
			r := reps[len(reps)-1]
			r.End = end
			r.Text = string(log[r.Start:end])
			lastEnd, lastLine = end, lineNo
		}
		off = end
	}
	finish(len(log))
	return reps
}

func isOops(line string) bool {
	return strings.HasPrefix(line, "Oops: ") || strings.HasPrefix(line, "invalid opcode: ")
}

// dieRe matches the line die() prints when the kernel kills the task
// that hit a fault: "Oops: 0002 [#1] PREEMPT SMP", "invalid opcode: 0000
// [#1] ...", "general protection fault, ...: 0000 [#1] ...".
var dieRe = regexp.MustCompile(`: [0-9a-f]{4} \[#[0-9]+\]`)

// Worst returns the most severe report in log, the first of equally
// severe ones, or nil: one that killed a task or stopped the kernel, then
// any but a warning or an RSS counter, then those. A run's finding is its
// worst report: with the first, a WARNING (perhaps a known issue, or one
// the baseline shows too) hid a BUG or an Oops that followed it.
func Worst(log []byte) *Report {
	var worst *Report
	for _, r := range Parse(log) {
		if worst == nil || r.severity() > worst.severity() {
			worst = r
		}
	}
	return worst
}

// severity ranks reports for Worst.
func (r *Report) severity() int {
	switch {
	case r.KillsTask():
		return 2
	case r.Kind != Warning && r.Kind != RSS:
		return 1
	}
	return 0
}

// First returns the first report in log, or nil.
func First(log []byte) *Report {
	if r := Parse(log); len(r) > 0 {
		return r[0]
	}
	return nil
}

// Contains reports cheaply whether log may contain a report (a prefilter
// for Parse on every chunk of console output).
func Contains(log []byte) bool {
	for _, k := range quick {
		if bytes.Contains(log, k) {
			return true
		}
	}
	return false
}

var quick = [][]byte{
	[]byte("BUG"), []byte("WARNING:"), []byte("Oops"), []byte("general protection fault"),
	[]byte("Kernel panic"), []byte("INFO: task"), []byte("INFO: rcu"), []byte("rcu_sched"),
	[]byte("rcu_preempt"), []byte("LOCKUP"), []byte("KASAN"), []byte(" swap "),
}
