package checker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// Finding is one violated expectation.
type Finding struct {
	// Oracle names the rule: "snapshot", "isolation", "shared", "memory",
	// "mapping", "errno", "skipped", "child-exit", "missing-view",
	// "unexpected-view", "crash", "observation", "pipe", "linearizability"
	// and "linearizability-unknown" (the consistent-cut check could not
	// decide: undecided is reported, never passed).
	Oracle Oracle `json:"oracle"`
	// Signature identifies the kind of bug for deduplication: the oracle,
	// the operation kinds involved and the memory kind, never addresses,
	// offsets or operation indexes.
	Signature string `json:"signature"`
	// Where: the process, the view (index into Observation.Views, -1 if
	// none) and its At, the operation involved (-1 if none), the region,
	// page and region offset (-1/0 if none).
	Proc   int    `json:"proc"`
	View   int    `json:"view"`
	At     int    `json:"at"`
	Op     int    `json:"op"`
	Region int    `json:"region"`
	Page   int    `json:"page,omitempty"`
	Off    uint64 `json:"off,omitempty"`
	// Expected and Actual values of a word (content findings).
	Expected uint64 `json:"expected,omitempty"`
	Actual   uint64 `json:"actual,omitempty"`
	// Explanation is a readable account for a kernel developer.
	Explanation string `json:"explanation"`
}

func (f *Finding) String() string {
	return fmt.Sprintf("[%s] %s\n    %s", f.Oracle, f.Signature, f.Explanation)
}

// Omitted counts findings left out of a verdict to keep it small.
type Omitted struct {
	Oracle Oracle `json:"oracle"`
	Proc   int    `json:"proc"`
	View   int    `json:"view"`
	Count  int    `json:"count"`
}

// Verdict is the result of checking one observation.
type Verdict struct {
	Findings []Finding `json:"findings,omitempty"`
	// Omitted lists how many further findings of an oracle in a view (or
	// outside views) were dropped after the first few.
	Omitted []Omitted `json:"omitted,omitempty"`
	// Notes are remarks that are not findings: harness events, and where
	// the model stopped judging memory because it lost track.
	Notes []string `json:"notes,omitempty"`
	// Stats says how much was judged.
	Stats Stats `json:"stats"`
}

// Stats counts what a check compared.
type Stats struct {
	Views int `json:"views"` // views compared
	Pages int `json:"pages"` // readable pages whose content was compared
	// Cells are the thread-written words the consistent-cut oracle judged.
	Cells int `json:"cells,omitempty"`
	// Lost counts operations after which the model lost track of some
	// pages (their state and content were not judged afterwards).
	Lost int `json:"lost,omitempty"`
	// Excused counts findings an injected allocation failure the model
	// does not predict explains (the failed fork's errno, its killed
	// child's exit status and views).
	Excused int `json:"excused,omitempty"`
	// SharedUnjudged: shared memory stopped being judged at some point.
	SharedUnjudged bool `json:"shared_unjudged,omitempty"`
	// WordsMissing counts pages and cells left unjudged because a view
	// held their page's digest but not its words (a view recorded words
	// only where threads race, or hit its word cap): a run with every
	// view's words can judge them.
	WordsMissing int `json:"words_missing,omitempty"`
}

// OK reports whether no oracle failed.
func (v *Verdict) OK() bool { return len(v.Findings) == 0 }

// Signatures returns the distinct finding signatures, sorted.
func (v *Verdict) Signatures() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range v.Findings {
		if !seen[f.Signature] {
			seen[f.Signature] = true
			out = append(out, f.Signature)
		}
	}
	sort.Strings(out)
	return out
}

// String returns a short summary.
func (v *Verdict) String() string {
	if v.OK() {
		return "pass"
	}
	return fmt.Sprintf("FAIL: %d findings (%s)", v.total(), strings.Join(v.Signatures(), ", "))
}

func (v *Verdict) total() int {
	n := len(v.Findings)
	for _, o := range v.Omitted {
		n += o.Count
	}
	return n
}

// Report prints every finding readably.
func (v *Verdict) Report() string {
	var b strings.Builder
	if v.OK() {
		b.WriteString("verdict: pass\n")
	} else {
		fmt.Fprintf(&b, "verdict: FAIL, %d findings, %d signatures\n", v.total(), len(v.Signatures()))
		for _, s := range v.Signatures() {
			fmt.Fprintf(&b, "  signature %s\n", s)
		}
		for i := range v.Findings {
			fmt.Fprintf(&b, "%d. %s\n", i+1, v.Findings[i].String())
		}
		for _, o := range v.Omitted {
			where := "outside views"
			if o.View >= 0 {
				where = fmt.Sprintf("in view %d (%s)", o.View, procName(o.Proc))
			}
			fmt.Fprintf(&b, "   ... and %d more %s findings %s\n", o.Count, o.Oracle, where)
		}
	}
	for _, n := range v.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// Limits on the size of a verdict.
const (
	// MaxPerGroup is how many findings of one oracle in one view (or of
	// one oracle outside views) are kept in detail.
	MaxPerGroup = 5
	maxFindings = 200
	maxNotes    = 20
)

type groupKey struct {
	oracle Oracle
	view   int
}

type collector struct {
	v      Verdict
	excuse *injectedExcuses // findings an injected failure explains (events.go)
	groups map[groupKey]int
	omit   map[groupKey]int // index into v.Omitted
}

func newCollector() *collector {
	return &collector{groups: map[groupKey]int{}, omit: map[groupKey]int{}}
}

func (c *collector) add(f Finding) {
	if c.excuse.excuses(&f) {
		c.v.Stats.Excused++
		return
	}
	k := groupKey{f.Oracle, f.View}
	c.groups[k]++
	if c.groups[k] > MaxPerGroup || len(c.v.Findings) >= maxFindings {
		j, ok := c.omit[k]
		if !ok {
			j = len(c.v.Omitted)
			c.v.Omitted = append(c.v.Omitted, Omitted{Oracle: f.Oracle, Proc: f.Proc, View: f.View})
			c.omit[k] = j
		}
		c.v.Omitted[j].Count++
		return
	}
	c.v.Findings = append(c.v.Findings, f)
}

func (c *collector) note(format string, args ...any) {
	if len(c.v.Notes) < maxNotes {
		c.v.Notes = append(c.v.Notes, fmt.Sprintf(format, args...))
	}
}

// viewName describes a view for explanations.
func viewName(proc, at int) string {
	switch at {
	case obs.AtStart:
		return fmt.Sprintf("start view of the %s", procName(proc))
	case obs.AtEnd:
		return procName(proc) + " end view"
	}
	return fmt.Sprintf("%s check view at op %d", procName(proc), at)
}
