package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// rollbackSection shows the executor's measurements around failed or
// killed forks: the finding's fork first.
func rollbackSection(p *prog.Program, o *obs.Observation, ev *checker.Finding) string {
	if o == nil || len(o.Rollbacks) == 0 {
		return ""
	}
	rbs := append([]obs.Rollback(nil), o.Rollbacks...)
	sort.SliceStable(rbs, func(i, j int) bool {
		return ev != nil && rbs[i].Op == ev.Op && rbs[j].Op != ev.Op
	})
	var b html
	for _, rb := range rbs {
		mark := ""
		if ev != nil && rb.Op == ev.Op {
			mark = ` <span class="badge b-rollback">the finding's fork</span>`
		}
		opText := ""
		if rb.Op >= 0 && rb.Op < len(p.Ops) {
			opText = p.Ops[rb.Op].String()
		}
		b.f(`<h3>fork f%d (op %d <code>%s</code>), cause %s%s</h3>`, rb.Fork, rb.Op, esc(opText), esc(rb.Cause), mark)
		rollbackFacts(&b, p, &rb)
		rollbackMeasurements(&b, &rb)
		if rb.MapsBefore != "" || rb.MapsAfter != "" {
			b.f(`<div class="grid2"><div><b>maps before</b><pre>%s</pre></div><div><b>maps after</b><pre>%s</pre></div></div>`,
				diffLines(rb.MapsBefore, rb.MapsAfter), diffLines(rb.MapsAfter, rb.MapsBefore))
		}
		if len(rb.PMDBefore)+len(rb.PMDAfter) > 0 {
			rollbackPMDs(&b, &rb)
		}
	}
	return b.String()
}

// rollbackFacts writes what a rollback measurement says about its fork:
// the injected fault, the child's side, what fork returned, where the
// after measurement was taken.
func rollbackFacts(b *html, p *prog.Program, rb *obs.Rollback) {
	b.f(`<div class="kv">`)
	kv := func(k, v string) { b.f(`<div>%s</div><div>%s</div>`, esc(k), esc(v)) }
	if rb.FailNth > 0 || rb.Injection != "" {
		kv("fault injection", fmt.Sprintf("fail_nth=%d: %s %s", rb.FailNth, rb.Injection, rb.Reason))
	}
	if len(rb.Setup) > 0 {
		kv("setup", strings.Join(rb.Setup, " "))
	}
	if rb.Site != "" {
		kv("injection site", rb.Site)
	}
	if rb.Silent {
		kv("injection site", "not reported: an allocation that asks for no warning (__GFP_NOWARN), which the kernel fails silently")
	}
	if rb.Memcg != "" {
		kv("memory cgroup", rb.Memcg)
	}
	if c := rb.Child; c != nil {
		what := fmt.Sprintf("childfail=%d", c.FailNth)
		if c.ChildOOM > 0 {
			what = fmt.Sprintf("child_oom=%d", c.ChildOOM)
		}
		kv("the child's side", fmt.Sprintf("%s: %s (remaining %d) %s", what, c.Injection, c.Remaining, c.Reason))
		if c.Site != "" {
			kv("child fault site", fmt.Sprintf("%s (phase %s)", c.Site, c.Phase))
		}
		if c.Silent {
			kv("child fault site", "not reported: an allocation that asks for no warning (__GFP_NOWARN), which the kernel fails silently")
		}
		out := "reached user space"
		if c.Outcome == "died" {
			out = fmt.Sprintf("died before user space: signal %d, exit code %d", c.Signal, c.Status)
		}
		kv("child outcome", out)
		if c.Memcg != "" {
			kv("child memory cgroup", c.Memcg)
		}
		if c.Ran != "" {
			kv("armed late", c.Ran)
		}
	}
	kv("fork returned", fmt.Sprintf("errno %d", rb.Errno))
	at := ""
	if rb.At >= 0 && rb.At < len(p.Ops) {
		at = p.Ops[rb.At].String()
	}
	kv("after measured at", fmt.Sprintf("op %d `%s`", rb.At, at))
	if rb.Comparable {
		kv("comparable", "yes: nothing but the fork ran between the measurements, so maps and content must be identical")
	} else {
		kv("comparable", "no: other operations ran between the measurements")
	}
	if rb.MemoryNote != "" {
		kv("memory", rb.MemoryNote)
	}
	if rb.PageTablesNote != "" {
		kv("page tables", rb.PageTablesNote)
	}
	kv("PMD flags from", rb.PMDSource)
	b.f(`</div>`)
}

// rollbackMeasurements writes the table of measurements before and after
// the fork (those zero on both sides left out) and the write pass.
func rollbackMeasurements(b *html, rb *obs.Rollback) {
	b.f(`<table style="margin-top:6px"><tr><th>measurement</th><th class="num">before</th><th class="num">after</th></tr>`)
	hidden := 0
	row := func(name string, before, after any) {
		bs, as := fmt.Sprint(before), fmt.Sprint(after)
		if (bs == "0" || bs == "0x0") && bs == as {
			hidden++ // zero before and after: not measured, or nothing to measure
			return
		}
		cls := "num mono"
		if bs != as {
			cls += " changed"
		}
		b.f(`<tr><td>%s</td><td class="%s">%s</td><td class="%s">%s</td></tr>`, esc(name), cls, esc(bs), cls, esc(as))
	}
	row("children of the forking thread", fmt.Sprint(rb.ChildrenBefore), fmt.Sprint(rb.ChildrenAfter))
	row("content digest", fmt.Sprintf("%#x", rb.DigestBefore), fmt.Sprintf("%#x", rb.DigestAfter))
	row("readable pages", rb.PagesBefore, rb.PagesAfter)
	row("write pass: minor faults", rb.BaselineFaults, rb.Faults)
	row("PageTables (kB, system)", kb(rb.PageTablesBefore), kb(rb.PageTablesAfter))
	row("VmPTE (kB, main process)", kb(rb.VmPTEBefore), kb(rb.VmPTEAfter))
	b.f(`</table>`)
	if hidden > 0 {
		b.f(`<p class="note">%d measurements that were zero before and after are left out.</p>`, hidden)
	}
	if rb.WritePages > 0 {
		b.f(`<p class="note">write pass: %d pages in %s</p>`, rb.WritePages, dur(rb.PassNanos))
	}
}

// rollbackPMDs writes the PMD entries before and after the fork, by
// address.
func rollbackPMDs(b *html, rb *obs.Rollback) {
	b.f(`<table style="margin-top:6px"><tr><th>PMD (2 MiB at)</th><th>before</th><th>after</th></tr>`)
	type pair struct{ before, after *obs.PMDEntry }
	m := map[uint64]*pair{}
	var addrs []uint64
	get := func(a uint64) *pair {
		if m[a] == nil {
			m[a] = &pair{}
			addrs = append(addrs, a)
		}
		return m[a]
	}
	for i := range rb.PMDBefore {
		get(rb.PMDBefore[i].Addr).before = &rb.PMDBefore[i]
	}
	for i := range rb.PMDAfter {
		get(rb.PMDAfter[i].Addr).after = &rb.PMDAfter[i]
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for _, a := range addrs {
		bs, as := pmdFlags(m[a].before), pmdFlags(m[a].after)
		cls := "mono"
		if bs != as {
			cls += " changed"
		}
		b.f(`<tr><td class="mono">%#x%s</td><td class="%s">%s</td><td class="%s">%s</td></tr>`, a, esc(regionOf(a)), cls, bs, cls, as)
	}
	b.f(`</table>`)
}

func kb(v int64) string {
	if v < 0 {
		return "not measured"
	}
	return fmt.Sprint(v)
}

func pmdFlags(e *obs.PMDEntry) string {
	if e == nil {
		return "—"
	}
	var f []string
	if e.Present {
		f = append(f, "present")
	} else {
		f = append(f, "not-present")
	}
	if e.RW {
		f = append(f, "RW")
	} else {
		f = append(f, "read-only")
	}
	if e.Huge {
		f = append(f, "huge")
	}
	return strings.Join(f, " ")
}

// regionOf names the region and page of an arena address.
func regionOf(a uint64) string {
	if a < prog.ArenaBase {
		return ""
	}
	r := (a - prog.ArenaBase) / prog.SpanBytes
	if r >= prog.MaxRegions {
		return ""
	}
	return fmt.Sprintf(" (r%d page %d)", r, (a-prog.Base(int(r)))/prog.PageSize)
}

// diffLines escapes a, marking lines that b lacks.
func diffLines(a, b string) string {
	have := map[string]bool{}
	for _, l := range strings.Split(b, "\n") {
		have[l] = true
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(a, "\n"), "\n") {
		if !have[l] {
			out = append(out, `<span class="changed">`+esc(l)+`</span>`)
		} else {
			out = append(out, esc(l))
		}
	}
	return strings.Join(out, "\n")
}
