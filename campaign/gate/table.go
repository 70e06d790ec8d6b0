package gate

import (
	"fmt"
	"strings"
)

// BaselineTable is the baseline comparison as the 0-day bot prints it: a
// Markdown table with one row per finding (signature), how often its
// reproducer showed it on the baseline and on the kernel under test
// ("patched"), as k/N runs, and its status. A rate is always a count of
// runs, so a flaky result reads "2/5", never a bare pass or fail; "-"
// marks a kernel it was not run on, with the reason in a footnote (as
// does a count whose replays were cut short).
//
// The patched count is the replays of the reproducer after minimizing
// (FindingRecord.Reproduced/Replays), with the fresh-VM validation's
// verdict in a footnote; the campaign runs that first showed it are not
// in the Result.
func BaselineTable(r *Result) string {
	var b strings.Builder
	base := "none"
	if r.Baseline != nil {
		base = tableKernel(*r.Baseline)
	}
	fmt.Fprintf(&b, "Baseline comparison: %s (patched) against %s (baseline).\n\n", mdEscape(tableKernel(r.Kernel)), mdEscape(base))
	b.WriteString("| signature | baseline k/N | patched k/N | status |\n")
	b.WriteString("|---|---|---|---|\n")
	var notes tableFootnotes
	for _, f := range r.Findings {
		baseCell, patchedCell := tableBaselineCell(r, f, &notes), tablePatchedCell(f, &notes)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", mdCode(f.Signature), baseCell, patchedCell, mdEscape(tableStatus(f)))
	}
	for _, c := range r.Fixes {
		// A claimed fix (--fixes): its reproducer's runs on each kernel.
		sigs := sigList(c.Baseline)
		if sigs == "" {
			sigs = "no finding on the baseline"
		}
		fmt.Fprintf(&b, "| --fixes `%s`: %s | %d/%d | %d/%d | fix %s |\n", mdCode(c.Path), mdEscape(sigs),
			c.BaselineFailed, c.BaselineRuns, c.PatchedFailed, c.PatchedRuns, c.Status)
	}
	if len(r.Findings) == 0 && len(r.Fixes) == 0 {
		fmt.Fprintf(&b, "\nNo findings in %d programs: nothing to compare", r.Programs)
		if r.Outcome == "error" {
			fmt.Fprintf(&b, " (the gate erred: %s)", mdEscape(r.Reason))
		}
		b.WriteString(".\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "[^%d]: %s\n", i+1, mdEscape(n))
		}
	}
	return b.String()
}

func tableKernel(k KernelIdentity) string {
	s := k.Target
	if k.Release != "" && k.Release != k.Target {
		s += " " + k.Release
	}
	if k.SHA256 != "" {
		s += fmt.Sprintf(" (sha256 %.12s)", k.SHA256)
	}
	return s
}

// tableFootnotes are numbered reasons, each given once.
type tableFootnotes []string

// mark is the footnote reference for reason.
func (n *tableFootnotes) mark(reason string) string {
	for i, s := range *n {
		if s == reason {
			return fmt.Sprintf("[^%d]", i+1)
		}
	}
	*n = append(*n, reason)
	return fmt.Sprintf("[^%d]", len(*n))
}

func tableRate(k, n int) string { return fmt.Sprintf("%d/%d", k, n) }

func tableBaselineCell(r *Result, f FindingRecord, notes *tableFootnotes) string {
	b := f.Baseline
	var why []string
	for _, n := range []string{b.noteOrEmpty(), b.inconclusiveNote()} {
		if n != "" {
			why = append(why, n)
		}
	}
	switch {
	case b != nil && b.Runs > 0 && len(why) > 0:
		return tableRate(b.Reproduced, b.Runs) + notes.mark(strings.Join(why, "; "))
	case b != nil && b.Runs > 0:
		return tableRate(b.Reproduced, b.Runs)
	case b != nil && b.Inconclusive > 0:
		return "-" + notes.mark("inconclusive: "+strings.Join(why, "; "))
	case b != nil && b.Note != "":
		return "-" + notes.mark("not run on the baseline: "+b.Note)
	case writerFindingStatus(f) == StatusKnown:
		return "-" + notes.mark("a known issue: not replayed on the baseline")
	case r.Baseline == nil:
		return "-" + notes.mark("no baseline kernel (none given, or the target has only one kernel)")
	}
	return "-" + notes.mark("not replayed on the baseline (budget spent or baseline unavailable)")
}

// tablePatchedCell is the replays' count, with the fresh-VM validation's
// verdict as its footnote where it ran.
func tablePatchedCell(f FindingRecord, notes *tableFootnotes) string {
	if f.Replays > 0 {
		fresh := ""
		if v := f.freshVerdict(); v != "" {
			fresh = notes.mark("then " + v)
		}
		return tableRate(f.Reproduced, f.Replays) + fresh
	}
	if v := f.Fresh; v != nil && v.Runs > 0 {
		return tableRate(v.Reproduced, v.Runs) + notes.mark("replays on fresh VMs only: "+f.freshVerdict())
	}
	return "-" + notes.mark("shown by a run of the gate, not replayed after: "+f.Reproducibility())
}

// tableStatus is the finding's status, its group, and "flaky" where a
// kernel showed it in some runs but not all.
func tableStatus(f FindingRecord) string {
	s := writerFindingStatus(f)
	if f.Group != "" {
		s += " (" + f.Group + ")"
	}
	var flaky []string
	if b := f.Baseline; b != nil && b.Reproduced > 0 && b.Reproduced < b.Runs {
		flaky = append(flaky, "baseline")
	}
	if f.Reproduced > 0 && f.Reproduced < f.Replays || f.Fresh != nil && f.Fresh.Reproduced < f.Fresh.Runs {
		flaky = append(flaky, "patched")
	}
	if len(flaky) > 0 {
		s += ", flaky on " + strings.Join(flaky, " and ")
	}
	return s
}

// mdEscape keeps text from ending a table cell or breaking a line.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
}

// mdCode is s inside a code span in a table cell.
func mdCode(s string) string {
	return strings.NewReplacer("`", "'", "|", `\|`, "\n", " ", "\r", " ").Replace(s)
}
