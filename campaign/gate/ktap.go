package gate

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// KTAP: the kernel's test output format (Documentation/dev-tools/ktap.rst,
// KTAP version 1), as kselftest prints it. WriteKTAP writes the version
// line, the plan, then one test line per oracle family and one per
// finding group, with diagnostic lines ("# ...") before each test line
// and a kselftest-style "# Totals:" line at the end.
//
// Only the kernel is ever "not ok": an oracle family with a new finding,
// a group whose status is new. Known and pre-existing groups are
// "ok ... # SKIP <why>" (the gate sets them aside, saying why), and so is
// an executor death or hang that did not reproduce (harness-flake) or was
// never replayed (unconfirmed), counted as a harness error. An
// oracle the target cannot fire, or that judged nothing, is "ok ... #
// SKIP" (never a bare "ok"). KTAP's only directives are SKIP and TODO, so
// harness errors (a phase that failed, a corpus program the harness lost,
// too few programs, an interrupted gate) are diagnostic lines
// "# harness error: ...", counted as "error:" in the totals; the gate's
// exit status (2) is what fails such a run.

// WriteKTAP writes r as KTAP version 1.
func WriteKTAP(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	k := &ktapWriter{w: bw}
	k.header(r)
	for _, oc := range r.Oracles {
		k.oracle(r, oc)
	}
	for _, g := range r.Groups {
		k.group(r, g)
	}
	for _, c := range r.Fixes {
		k.fix(c)
	}
	fmt.Fprintf(bw, "# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:%d error:%d\n", k.pass, k.fail, k.skip, k.errors)
	return bw.Flush()
}

type ktapWriter struct {
	w                        *bufio.Writer
	n                        int
	pass, fail, skip, errors int
}

// diag writes text as diagnostic lines.
func (k *ktapWriter) diag(format string, args ...any) {
	for _, l := range strings.Split(strings.TrimRight(fmt.Sprintf(format, args...), "\n"), "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			fmt.Fprintln(k.w, "#")
			continue
		}
		fmt.Fprintf(k.w, "# %s\n", l)
	}
}

// harnessError writes one harness problem as a diagnostic line.
func (k *ktapWriter) harnessError(format string, args ...any) {
	k.errors++
	k.diag("harness error: "+format, args...)
}

// result writes a test line; skip, if not empty, is the SKIP reason.
func (k *ktapWriter) result(ok bool, desc, skip string) {
	k.n++
	res := "ok"
	if !ok {
		res = "not ok"
	}
	line := fmt.Sprintf("%s %d %s", res, k.n, ktapText(desc))
	switch {
	case skip != "":
		k.skip++
		line += " # SKIP " + ktapText(skip)
	case ok:
		k.pass++
	default:
		k.fail++
	}
	fmt.Fprintln(k.w, line)
}

// fix is the line of a claimed fix (--fixes): not ok when the patched
// kernel still fails its reproducer, SKIP when the claim could not be
// confirmed (the gate's exit 2 says so too).
func (k *ktapWriter) fix(c FixCase) {
	k.diag("fix %s: %s", c.Path, c.Reason)
	switch c.Status {
	case FixFixed:
		k.result(true, "fixes "+c.Path, "")
	case FixNotFixed:
		k.result(false, "fixes "+c.Path, "")
	default:
		k.result(true, "fixes "+c.Path, "unconfirmed: "+c.Reason)
	}
}

// ktapText is s on one line without '#', which only starts a directive.
func ktapText(s string) string {
	s = strings.NewReplacer("#", "", "\n", " ", "\r", " ", "\t", " ").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

func (k *ktapWriter) header(r *Result) {
	fmt.Fprintln(k.w, "KTAP version 1")
	fmt.Fprintf(k.w, "1..%d\n", len(r.Oracles)+len(r.Groups)+len(r.Fixes))
	k.diag("forkfuzz ci: %s (exit %d): %s", strings.ToUpper(r.Outcome), r.ExitCode, r.Reason)
	kern := fmt.Sprintf("kernel: target %s, release %s", r.Kernel.Target, r.Kernel.Release)
	if r.Kernel.SHA256 != "" {
		kern += ", image sha256 " + r.Kernel.SHA256
	}
	if r.Baseline != nil {
		kern += fmt.Sprintf("; baseline: target %s, release %s", r.Baseline.Target, r.Baseline.Release)
	}
	k.diag("%s", kern)
	k.diag("%d programs (%d corpus, %d fuzzed), %d forks, seed %d, profile %s", r.Programs, r.CorpusPrograms, r.FuzzPrograms, r.Forks, r.Seed, r.Profile)
	for _, ph := range r.Phases {
		if ph.Error != "" {
			k.harnessError("phase %s: %s", ph.Name, ph.Error)
		}
	}
	for _, cp := range r.Corpus {
		if cp.Status == "harness-error" {
			k.harnessError("corpus %s: %s", cp.Name, cp.Note)
		}
	}
	if r.Outcome == "error" && !strings.HasPrefix(r.Reason, "harness error: ") {
		k.harnessError("%s", r.Reason) // too few programs, unhealthy harness, interrupted
	}
	for _, w := range r.Warnings {
		k.diag("warning: %s", w)
	}
}

// oracle writes an oracle family's line.
func (k *ktapWriter) oracle(r *Result, oc OracleCase) {
	newF, other := 0, 0
	for _, f := range r.Findings {
		if f.Oracle != oc.Oracle {
			continue
		}
		k.diag("%s: %s [%s, group %s]: %s", oc.Oracle, f.Signature, writerFindingStatus(f), f.Group, f.StatusReason)
		if writerFindingStatus(f) == StatusNew {
			newF++
		} else {
			other++
		}
	}
	switch {
	case newF > 0:
		k.result(false, oc.Oracle, "")
	case other > 0:
		k.result(true, oc.Oracle, "")
	case oc.NotApplicable != "":
		k.result(true, oc.Oracle, oc.NotApplicable)
	case oc.Judgments == 0 && r.Programs == 0 && r.Outcome == "error":
		k.result(true, oc.Oracle, "not run: no program ran")
	case oc.Judgments == 0:
		k.result(true, oc.Oracle, fmt.Sprintf("not exercised: 0 %s in %d programs", oc.Needs, r.Programs))
	default:
		k.diag("%s: judged %d %s", oc.Oracle, oc.Judgments, oc.Needs)
		k.result(true, oc.Oracle, "")
	}
}

// group writes a finding group's line, after its findings' accounts.
func (k *ktapWriter) group(r *Result, g Group) {
	desc := g.ID + " " + strings.Join(g.Signatures, ", ")
	var reason string
	for _, s := range g.Signatures {
		f := r.findingBySig([]string{s})
		if f == nil {
			k.diag("%s %s: no finding record", g.ID, s)
			continue
		}
		k.diag("%s %s [%s]: %s; %s", g.ID, f.Signature, writerFindingStatus(*f), f.StatusReason, f.Reproducibility())
		if writerFindingStatus(*f) == g.Status && reason == "" {
			reason = f.StatusReason
		}
		if g.Status == StatusNew && writerFindingStatus(*f) == StatusNew {
			k.diag("%s", ktapExplanation(f.Explanation))
			k.diag("replay: %s", f.Replay)
		}
	}
	if len(g.Why) > 0 {
		k.diag("%s grouped: %s", g.ID, strings.Join(g.Why, "; "))
	}
	switch g.Status {
	case StatusNew, "":
		k.result(false, desc, "")
	case StatusHarnessFlake, StatusUnconfirmed:
		k.errors++
		k.result(true, desc, g.Status+": "+reason)
	default:
		k.result(true, desc, g.Status+": "+reason)
	}
}

// ktapExplanation is an explanation cut to a readable length.
func ktapExplanation(s string) string {
	const max = 40
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= max {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:max], "\n") + fmt.Sprintf("\n... %d more lines (see the finding's directory)", len(lines)-max)
}
