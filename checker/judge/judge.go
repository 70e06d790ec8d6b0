// Package judge is the one place a run is judged: from (program,
// observation, the target's error) to a verdict of typed issues plus what
// was judged and what was not. The campaign, sweeps, distributed
// coordinator, the simulated kernel's mutant hunt and every CLI command
// call Judge; nothing else classifies a target's answer.
//
// It sits above the targets (it knows the agents.Event contract, never a
// concrete backend) and below orchestration.
//
// Adding an oracle: add it to the checker (checker/oracle.go says how);
// Judge passes every checker finding through with its typed oracle. A new
// kind of target event needs only to implement agents.Event.
package judge

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Issue is one thing wrong with one run.
type Issue struct {
	// Oracle is the rule that broke: a checker.Oracle, or the oracle a
	// target event names ("executor-crash", "kernel-warning", ...).
	Oracle      checker.Oracle `json:"oracle"`
	Signature   string         `json:"signature"`
	Explanation string         `json:"explanation"`
	// Evidence locates a checker finding (process, view, operation,
	// region, page, expected and actual word); nil for target events.
	Evidence *checker.Finding `json:"evidence,omitempty"`
	// Files are extra files for the finding directory (a VM's console,
	// the kernel report, porcupine's visualization).
	Files map[string]string `json:"-"`
}

// SkippedOp is an operation the executor did not perform, and why.
type SkippedOp struct {
	Op     int    `json:"op"`
	Text   string `json:"text"` // the operation as written
	Reason string `json:"reason"`
}

// Verdict is the judgement of one run.
type Verdict struct {
	Issues []Issue `json:"issues,omitempty"`
	// Judged says how much the oracles compared.
	Judged Judged `json:"judged"`
	// Skipped lists operations the target could not perform (the kernel
	// or the machine lacks what they need); their effects were not judged.
	Skipped []SkippedOp `json:"skipped,omitempty"`
	// Notes are what was not judged and why, and harness remarks.
	Notes []string `json:"notes,omitempty"`
	// Omitted counts findings left out of Issues to keep it small.
	Omitted int `json:"omitted,omitempty"`
}

// Judged counts what a verdict rests on.
type Judged struct {
	Ops   int `json:"ops"`   // operations that ran and whose results were compared
	Views int `json:"views"` // process views compared with the model
	Pages int `json:"pages"` // readable pages whose content was compared
	// Cells are the thread-written words the consistent-cut oracle judged.
	Cells int `json:"cells,omitempty"`
	// Lost: operations after which the model lost track of some pages.
	Lost int `json:"lost,omitempty"`
	// SharedUnjudged: shared memory stopped being judged at some point.
	SharedUnjudged bool `json:"shared_unjudged,omitempty"`
	// WordsMissing: pages and cells not judged because the views held
	// their digests but not their words (checker.Stats.WordsMissing).
	WordsMissing int `json:"words_missing,omitempty"`
	// Excused: findings explained by an injected failure (not issues).
	Excused int `json:"excused,omitempty"`
	// Observation is false when there was none to judge (a crash).
	Observation bool `json:"observation"`
	// Forks, PipeReads and Rollbacks count what the oracles of children,
	// pipes and failed forks had to judge: fork and readpipe operations
	// that ran, and the executor's rollback measurements.
	Forks     int `json:"forks,omitempty"`
	PipeReads int `json:"pipe_reads,omitempty"`
	Rollbacks int `json:"rollbacks,omitempty"`
	// AtFork is what the run exercised around its forks (evidence, not
	// judged; nil when the target said nothing).
	AtFork *AtFork `json:"at_fork,omitempty"`
}

// AtFork sums the observation's per-fork evidence (obs.Overlap,
// obs.ForkPages): how many forks had writer threads logging stores, in how
// many some store overlapped the call, the stores, and the page census.
type AtFork struct {
	WriterForks int `json:"writer_forks,omitempty"`
	// IdleForks counts writer forks with no overlapping store whose
	// writers made no store for longer than the fork call took around
	// it (obs.Overlap.Idle > Ticks): the writer was not running.
	IdleForks    int         `json:"idle_forks,omitempty"`
	OverlapForks int         `json:"overlap_forks,omitempty"`
	Overlap      obs.Overlap `json:"overlap"`
	// MoverForks counts forks with migrateloop threads, MovedForks those
	// at which some pass that moved pages intersected the fork call.
	MoverForks int `json:"mover_forks,omitempty"`
	MovedForks int `json:"moved_forks,omitempty"`
	// Censused counts forks with a page census; Pages sums them.
	Censused int           `json:"censused,omitempty"`
	Pages    obs.ForkPages `json:"pages"`
	// Held counts, per page kind, the censused forks at which at least
	// one page of that kind was there: how often the special kinds the
	// generator aims at really held (swapped, ksm, thp, pmd-thp,
	// pte-thp, mlocked, uffd-wp, exclusive, zero, huge-zero, hugetlb,
	// file).
	Held map[string]int `json:"held,omitempty"`
}

// heldKinds are the keys of AtFork.Held, in the order the summary says them.
var heldKinds = []string{"swapped", "ksm", "thp", "pmd-thp", "pte-thp", "mlocked", "uffd-wp", "exclusive", "zero", "huge-zero", "hugetlb", "file"}

func held(c obs.ForkPages) map[string]bool {
	return map[string]bool{"swapped": c.Swapped > 0, "ksm": c.KSM > 0, "thp": c.THP > 0, "pmd-thp": c.PMDMapped > 0,
		"pte-thp": c.THP > c.PMDMapped, "mlocked": c.Mlocked > 0, "uffd-wp": c.UffdWP > 0, "exclusive": c.Exclusive > 0,
		"zero": c.Zero > 0, "huge-zero": c.HugeZero > 0, "hugetlb": c.Hugetlb > 0, "file": c.File > 0}
}

// atFork collects o's per-fork evidence (nil: none).
func atFork(o *obs.Observation) *AtFork {
	var a AtFork
	any := false
	for _, r := range o.Ops {
		if r.Overlap == nil {
			continue
		}
		any = true
		if r.Overlap.Movers {
			a.MoverForks++
			if r.Overlap.Moved > 0 {
				a.MovedForks++
			}
			a.Overlap.MovePasses += r.Overlap.MovePasses
			a.Overlap.Moved += r.Overlap.Moved
		}
		if !r.Overlap.Writers && r.Overlap.Movers {
			continue // (an observation from before migrateloop has neither flag: writers)
		}
		a.WriterForks++
		if r.Overlap.Stores > 0 {
			a.OverlapForks++
		} else if r.Overlap.Idle > r.Overlap.Ticks {
			a.IdleForks++
		}
		a.Overlap.Stores += r.Overlap.Stores
		a.Overlap.Inside += r.Overlap.Inside
		a.Overlap.Blocked += r.Overlap.Blocked
	}
	for _, c := range o.ForkPages {
		any = true
		a.Censused++
		a.Pages.Add(c)
		for k, ok := range held(c) {
			if ok {
				if a.Held == nil {
					a.Held = map[string]int{}
				}
				a.Held[k]++
			}
		}
	}
	if !any {
		return nil
	}
	return &a
}

// Add sums b into a.
func (a *AtFork) Add(b *AtFork) {
	if b == nil {
		return
	}
	a.WriterForks += b.WriterForks
	a.OverlapForks += b.OverlapForks
	a.IdleForks += b.IdleForks
	a.Overlap.Stores += b.Overlap.Stores
	a.Overlap.Inside += b.Overlap.Inside
	a.Overlap.Blocked += b.Overlap.Blocked
	a.MoverForks += b.MoverForks
	a.MovedForks += b.MovedForks
	a.Overlap.MovePasses += b.Overlap.MovePasses
	a.Overlap.Moved += b.Overlap.Moved
	a.Censused += b.Censused
	a.Pages.Add(b.Pages)
	for k, n := range b.Held {
		if a.Held == nil {
			a.Held = map[string]int{}
		}
		a.Held[k] += n
	}
}

// String says it in a line for a summary.
func (a *AtFork) String() string {
	var parts []string
	if a.WriterForks > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d forks with writer threads had stores overlapping the fork call (%d stores: %d completed inside it, %d blocked until it returned)",
			a.OverlapForks, a.WriterForks, a.Overlap.Stores, a.Overlap.Inside, a.Overlap.Blocked))
		if a.IdleForks > 0 {
			parts[len(parts)-1] += fmt.Sprintf(", at %d of the others the writers made no store for longer than the fork took around it (not running)", a.IdleForks)
		}
	}
	if a.MoverForks > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d forks with migrating threads had page moves overlapping the fork call (%d pages moved in %d passes)",
			a.MovedForks, a.MoverForks, a.Overlap.Moved, a.Overlap.MovePasses))
	}
	if a.Censused > 0 {
		p := a.Pages
		s := fmt.Sprintf("pages at %d forks: %d resident before (%d swapped out, %d uffd-wp", a.Censused, p.Present, p.Swapped, p.UffdWP)
		if p.Flags {
			s += fmt.Sprintf(", %d THP of which %d PMD-mapped, %d KSM, %d mlocked, %d zeropage, %d huge zeropage, %d hugetlb, %d file page cache",
				p.THP, p.PMDMapped, p.KSM, p.Mlocked, p.Zero, p.HugeZero, p.Hugetlb, p.File)
		} else {
			s += "; THP/KSM/mlock not readable"
		}
		s += fmt.Sprintf("), after: %d shared with the child, %d exclusive", p.Shared, p.Exclusive)
		var hs []string
		for _, k := range heldKinds {
			hs = append(hs, fmt.Sprintf("%s %d", k, a.Held[k]))
		}
		s += fmt.Sprintf("; forks with such pages: %s (of %d)", strings.Join(hs, ", "), a.Censused)
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// OK reports whether no oracle failed.
func (v *Verdict) OK() bool { return len(v.Issues) == 0 }

// Has reports whether v has an issue with signature sig.
func (v *Verdict) Has(sig string) bool {
	for _, is := range v.Issues {
		if is.Signature == sig {
			return true
		}
	}
	return false
}

// Signatures returns the distinct signatures, sorted.
func (v *Verdict) Signatures() []string {
	seen := map[string]bool{}
	var out []string
	for _, is := range v.Issues {
		if !seen[is.Signature] {
			seen[is.Signature] = true
			out = append(out, is.Signature)
		}
	}
	sort.Strings(out)
	return out
}

// HTMLTimeout bounds porcupine's visualization of a linearizability issue.
var HTMLTimeout = 10 * time.Second

// Judge judges one run of p: o is the observation (nil if none) and
// runErr the target's error. A target event (agents.Event) is an issue;
// any other error is a harness failure, returned as the error and never
// judged as a finding.
func Judge(p *prog.Program, o *obs.Observation, runErr error) (*Verdict, error) {
	v := &Verdict{}
	if runErr != nil {
		ev, ok := agents.AsEvent(runErr)
		if !ok {
			return nil, runErr
		}
		is := Issue{Oracle: checker.Oracle(ev.Oracle()), Signature: ev.Signature(), Explanation: ev.Explanation()}
		if f, ok := ev.(agents.EventFiles); ok {
			is.Files = f.Files()
		}
		v.Issues = append(v.Issues, is)
	}
	if o == nil {
		if runErr == nil {
			return nil, fmt.Errorf("judge: the target returned neither an observation nor an error")
		}
		v.Notes = append(v.Notes, "no observation: only the target's event was judged")
		return v, nil
	}
	cv := checker.Check(p, o)
	v.Judged = Judged{Views: cv.Stats.Views, Pages: cv.Stats.Pages, Cells: cv.Stats.Cells, Lost: cv.Stats.Lost,
		SharedUnjudged: cv.Stats.SharedUnjudged, WordsMissing: cv.Stats.WordsMissing, Excused: cv.Stats.Excused, Observation: true, AtFork: atFork(o)}
	var html map[string][]byte
	for i := range cv.Findings {
		f := cv.Findings[i]
		is := Issue{Oracle: f.Oracle, Signature: f.Signature, Explanation: f.String(), Evidence: &f}
		if f.Oracle == checker.OracleLinearizability {
			if html == nil {
				html = checker.LinearizabilityHTML(p, o, HTMLTimeout)
			}
			is.Files = make(map[string]string, len(html))
			for name, b := range html {
				is.Files[name] = string(b)
			}
		}
		v.Issues = append(v.Issues, is)
	}
	for _, om := range cv.Omitted {
		v.Omitted += om.Count
	}
	v.Notes = append(v.Notes, cv.Notes...)
	for i, r := range o.Ops {
		if i >= len(p.Ops) {
			break
		}
		switch {
		case r.Skip != "":
			v.Skipped = append(v.Skipped, SkippedOp{Op: i, Text: p.Ops[i].String(), Reason: r.Skip})
		case r.Ran:
			v.Judged.Ops++
			switch p.Ops[i].Kind {
			case prog.OpFork:
				v.Judged.Forks++
			case prog.OpReadPipe:
				v.Judged.PipeReads++
			}
		}
	}
	v.Judged.Rollbacks = len(o.Rollbacks)
	return v, nil
}

// Summary says in one line what was judged and what was not: "judged 12
// ops, 5 views, 340 pages; 2 ops skipped (uffdwp: ...); 1 note".
func (v *Verdict) Summary() string {
	j := v.Judged
	if !j.Observation {
		return "no observation to judge"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "judged %d ops, %d views, %d pages", j.Ops, j.Views, j.Pages)
	if j.Cells > 0 {
		fmt.Fprintf(&b, ", %d thread cells", j.Cells)
	}
	if n := len(v.Skipped); n > 0 {
		reasons := map[string]bool{}
		var rs []string
		for _, s := range v.Skipped {
			if !reasons[s.Reason] {
				reasons[s.Reason] = true
				rs = append(rs, s.Reason)
			}
		}
		fmt.Fprintf(&b, "; %d ops skipped, not judged (%s)", n, strings.Join(rs, "; "))
	}
	if j.Lost > 0 {
		fmt.Fprintf(&b, "; model lost track of some pages after %d ops", j.Lost)
	}
	if j.SharedUnjudged {
		b.WriteString("; shared memory partly unjudged")
	}
	if j.WordsMissing > 0 {
		fmt.Fprintf(&b, "; %d pages or cells unjudged without their words", j.WordsMissing)
	}
	if j.Excused > 0 {
		fmt.Fprintf(&b, "; %d findings excused by injected failures", j.Excused)
	}
	if n := len(v.Notes); n > 0 {
		fmt.Fprintf(&b, "; %d notes", n)
	}
	return b.String()
}

// Report prints the verdict readably: issues, what was judged, skipped
// operations and notes.
func (v *Verdict) Report() string {
	var b strings.Builder
	if v.OK() {
		b.WriteString("verdict: pass\n")
	} else {
		fmt.Fprintf(&b, "verdict: FAIL, %d issues, %d signatures\n", len(v.Issues)+v.Omitted, len(v.Signatures()))
		for i, is := range v.Issues {
			fmt.Fprintf(&b, "%d. [%s] %s\n    %s\n", i+1, is.Oracle, is.Signature, strings.ReplaceAll(is.Explanation, "\n", "\n    "))
		}
		if v.Omitted > 0 {
			fmt.Fprintf(&b, "   ... and %d more findings of the same oracles\n", v.Omitted)
		}
	}
	fmt.Fprintf(&b, "%s\n", v.Summary())
	for _, s := range v.Skipped {
		fmt.Fprintf(&b, "skipped: op %d `%s`: %s\n", s.Op, s.Text, s.Reason)
	}
	for _, n := range v.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if a := v.Judged.AtFork; a != nil {
		if s := a.String(); s != "" {
			fmt.Fprintf(&b, "at fork: %s\n", s)
		}
	}
	return b.String()
}

// Tally accumulates what many verdicts judged, for campaign summaries.
type Tally struct {
	Runs, Ops, Views, Pages, Cells int
	// Forks, PipeReads, Rollbacks: see Judged.
	Forks, PipeReads, Rollbacks int
	// SkippedOps counts skipped operations by reason.
	SkippedOps map[string]int
	// Unjudged counts runs where the model lost track of some memory.
	Unjudged int
	Notes    int
	// AtFork sums the runs' per-fork evidence.
	AtFork AtFork
}

// Add counts v.
func (t *Tally) Add(v *Verdict) {
	if v == nil {
		return
	}
	t.Runs++
	t.Ops += v.Judged.Ops
	t.Views += v.Judged.Views
	t.Pages += v.Judged.Pages
	t.Cells += v.Judged.Cells
	t.Forks += v.Judged.Forks
	t.PipeReads += v.Judged.PipeReads
	t.Rollbacks += v.Judged.Rollbacks
	if v.Judged.Lost > 0 || v.Judged.SharedUnjudged || v.Judged.WordsMissing > 0 {
		t.Unjudged++
	}
	t.Notes += len(v.Notes)
	t.AtFork.Add(v.Judged.AtFork)
	for _, s := range v.Skipped {
		if t.SkippedOps == nil {
			t.SkippedOps = map[string]int{}
		}
		t.SkippedOps[skipClass(s)]++
	}
}

// Merge adds u's counts to t (every field: TestTallyMergeEveryField).
func (t *Tally) Merge(u Tally) {
	t.Runs += u.Runs
	t.Ops += u.Ops
	t.Views += u.Views
	t.Pages += u.Pages
	t.Cells += u.Cells
	t.Forks += u.Forks
	t.PipeReads += u.PipeReads
	t.Rollbacks += u.Rollbacks
	t.Unjudged += u.Unjudged
	t.Notes += u.Notes
	t.AtFork.Add(&u.AtFork)
	for k, n := range u.SkippedOps {
		if t.SkippedOps == nil {
			t.SkippedOps = map[string]int{}
		}
		t.SkippedOps[k] += n
	}
}

// skipClass groups skip reasons by operation kind.
func skipClass(s SkippedOp) string {
	kind, _, _ := strings.Cut(strings.TrimSpace(s.Text), " ")
	if i := strings.Index(kind, ":"); i >= 0 {
		// "t1: uffdwp ..." or "f0: ..."
		rest := strings.TrimSpace(s.Text[i+1:])
		kind, _, _ = strings.Cut(rest, " ")
	}
	return kind
}

// String is the tally as one line for a campaign summary.
func (t *Tally) String() string {
	if t.Runs == 0 {
		return "judged: nothing"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "judged %d ops, %d views, %d pages", t.Ops, t.Views, t.Pages)
	if t.Cells > 0 {
		fmt.Fprintf(&b, ", %d thread cells", t.Cells)
	}
	if len(t.SkippedOps) > 0 {
		var ks []string
		for k := range t.SkippedOps {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var parts []string
		for _, k := range ks {
			parts = append(parts, fmt.Sprintf("%s %d", k, t.SkippedOps[k]))
		}
		fmt.Fprintf(&b, "; ops skipped by the target, not judged: %s", strings.Join(parts, ", "))
	}
	if t.Unjudged > 0 {
		fmt.Fprintf(&b, "; %d runs with memory the model lost track of", t.Unjudged)
	}
	return b.String()
}
