package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// MailFile is the report a maintainer can paste, written into the
// directory of every finding that counts against the kernel.
const MailFile = "report-mail.txt"

// faultsOf says which faults p injects, and where: fail_nth, a memory
// cgroup limit on the fork or the child, a SIGKILL of a child.
func faultsOf(p *prog.Program) []string {
	if p == nil {
		return nil
	}
	var out []string
	for i, op := range p.Ops {
		var what []string
		switch op.Kind {
		case prog.OpFork:
			if op.FailNth > 0 {
				what = append(what, fmt.Sprintf("fail_nth=%d (the fork's %d. fault-injection point fails)", op.FailNth, op.FailNth))
			}
			if op.OOMMemcg > 0 {
				what = append(what, fmt.Sprintf("oom_memcg=%d (the fork may charge %d more bytes to its memory cgroup)", op.OOMMemcg, op.OOMMemcg))
			}
			if op.ChildFail > 0 {
				what = append(what, fmt.Sprintf("childfail=%d (the child's %d. fault-injection point fails)", op.ChildFail, op.ChildFail))
			}
			if op.ChildOOM > 0 {
				what = append(what, fmt.Sprintf("child_oom=%d (the child in a memory cgroup of its own)", op.ChildOOM))
			}
		case prog.OpKill:
			what = append(what, "SIGKILL of the child")
		}
		if len(what) > 0 {
			out = append(out, fmt.Sprintf("op %d `%s`: %s", i, op, strings.Join(what, ", ")))
		}
	}
	return out
}

// faultsLine is faults for a summary line.
func faultsLine(fs []string) string {
	if len(fs) == 0 {
		return "no fault injected"
	}
	return "faults injected: " + strings.Join(fs, "; ")
}

// writeMails writes MailFile into the directory of every new or
// pre-existing finding.
func (g *gate) writeMails() {
	r := g.res
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Status != StatusNew && f.Status != StatusPreexisting {
			continue
		}
		path := filepath.Join(f.Dir, MailFile)
		if err := os.WriteFile(path, []byte(mailText(r, f)), 0o644); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		f.Mail = path
	}
}

// mailText is a finding's report as a maintainer would paste it.
func mailText(r *Result, f *FindingRecord) string {
	var b strings.Builder
	k := r.Kernel
	fmt.Fprintf(&b, "Subject: [forkfuzz] %s on %s\n\n", f.Signature, or(k.Release, "the kernel under test"))
	fmt.Fprintf(&b, "forkfuzz %s found %s (oracle %s) while gating this kernel:\n\n", r.Version, f.Signature, f.Oracle)
	fmt.Fprintf(&b, "  release:        %s\n", or(k.Release, "unknown"))
	if k.Version != "" {
		fmt.Fprintf(&b, "  version:        %s\n", k.Version)
	}
	if k.Image != "" {
		fmt.Fprintf(&b, "  image:          %s\n  image sha256:   %s\n", k.Image, or(k.SHA256, "unknown"))
	}
	if k.ConfigSHA256 != "" {
		fmt.Fprintf(&b, "  config sha256:  %s (%s)\n", k.ConfigSHA256, k.Config)
	}
	fmt.Fprintf(&b, "  target:         %s\n", k.Target)
	fmt.Fprintf(&b, "  status:         %s: %s\n", f.Status, f.StatusReason)
	fmt.Fprintf(&b, "  reproducible:   %s\n", f.Reproducibility())
	if f.Baseline != nil && r.Baseline != nil {
		fmt.Fprintf(&b, "  baseline:       %s: %s showed it\n", or(r.Baseline.Release, r.Baseline.Target), f.Baseline.shownOf())
	}
	fmt.Fprintf(&b, "  %s\n\n", faultsLine(f.Faults))
	fmt.Fprintf(&b, "What went wrong:\n\n%s\n\n", indentText(strings.TrimSpace(f.Explanation), 60))
	if f.reproProg != nil {
		fmt.Fprintf(&b, "Reproducer (forkfuzz program, %s):\n\n%s\n", filepath.Base(reproPath(f)), indentText(strings.TrimSpace(string(f.reproProg.Format())), 0))
	}
	if c := filepath.Join(f.Dir, "repro.c"); exists(c) {
		fmt.Fprintf(&b, "\nC reproducer: repro.c (attached; standalone):\n  gcc -O2 -static -pthread repro.c -o repro && ./repro\n")
	}
	fmt.Fprintf(&b, "\nRetest (one line, from a forkfuzz checkout):\n  %s\n\n", f.Replay)
	b.WriteString("Reported-by: <your name> <your address>\n")
	b.WriteString("Closes: <link to this report>\n")
	return b.String()
}

func reproPath(f *FindingRecord) string {
	if f.Minimized != "" {
		return f.Minimized
	}
	return f.Program
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// indentText indents s by two spaces, keeping at most max lines (0: all).
func indentText(s string, max int) string {
	lines := strings.Split(s, "\n")
	cut := 0
	if max > 0 && len(lines) > max {
		cut = len(lines) - max
		lines = lines[:max]
	}
	for i, l := range lines {
		lines[i] = "  " + l
	}
	if cut > 0 {
		lines = append(lines, fmt.Sprintf("  [%d more lines in report.txt]", cut))
	}
	return strings.Join(lines, "\n")
}
