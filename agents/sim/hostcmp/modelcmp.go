package hostcmp

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// ModelCmp runs generated programs on a real target (any agents.Target: the
// host kernel, a QEMU VM, usually wrapped in an agents.ForkImplTarget so
// that every fork is checked to have used the implementation under test)
// and on the simulated kernel in Mode, and sorts the differences into
// classes. Each program also runs on the simulated eager fork: a
// difference the eager model shares is a gap of the model of Linux as a
// whole (or a difference between kernel versions), one only Mode has is a
// gap of Mode's model.
type ModelCmp struct {
	Target    agents.Target
	Mode      sim.Mode
	SchedSeed uint64
	// Kernel, if set, is the release the models follow instead of the
	// one the target's observation names (e.g. "6.18" to see what the
	// version rules account for).
	Kernel string

	Programs, Skipped, Agree, Differ int
	// HarnessErrors counts target runs that failed (a VM that crashed, an
	// evidence check that failed); Events those that were findings by
	// themselves (a kernel report, a crashed executor).
	HarnessErrors, Events int
	// ModeOnly counts differing programs whose differences the eager
	// model does not share; ModelsDiffer programs on which the two models
	// disagree with each other.
	ModeOnly, ModelsDiffer int
	Classes                map[string]*Class
	// Errors are the first harness errors and events, for the report.
	Errors []string
}

// Class is one class of differences.
type Class struct {
	Name string
	// Programs with at least one difference of this class, and how many
	// of them the eager model shares it on.
	Programs, AlsoEager int
	// First counts the programs whose first difference is of this class
	// (the others are usually its consequences).
	First int
	// Example is the first program showing it (text), Text the first
	// difference.
	Example, Text string
	// Known is the explanation of a documented class ("" if none).
	Known string
}

// KnownClasses explains the classes of differences between the models and
// the kernels they were compared with that are not model bugs; keys are
// class names or prefixes ending in "*" (the longest prefix wins). It is
// empty: every class seen so far on the Async-fork kernel (6.1.192) was
// a version gap of the model and was fixed (sim.Config.Kernel;
// docs/asyncfork/README.md has the measurements).
var KnownClasses = map[string]string{}

// Explain returns the explanation of class ("" if it is not known).
func Explain(class string) string {
	if e, ok := KnownClasses[class]; ok {
		return e
	}
	best, bestLen := "", -1
	for k, e := range KnownClasses {
		if p, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(class, p) && len(p) > bestLen {
			best, bestLen = e, len(p)
		}
	}
	return best
}

// Comparable says why p cannot be compared with the model ("" when it
// can): the simulator does not model pipes, O_DIRECT, io_uring,
// userfaultfd or page migration, threads interleave differently on a real kernel, fault
// injection counts allocations the model does not make, and a SIGKILL is
// asynchronous (whether a write into a killed child lands varies).
func Comparable(p *prog.Program) string {
	for _, op := range p.Ops {
		switch {
		case op.Thread > 0 || op.Kind == prog.OpJoin || op.Kind == prog.OpStoreLoop:
			return "threads"
		case op.Kind.Pinned() && op.Kind != prog.OpProcMem && op.Kind != prog.OpPVWrite,
			op.Kind == prog.OpMigrate:
			return "not modelled: " + op.Kind.String()
		case op.FailNth > 0 || op.OOMMemcg > 0:
			return "fault injection"
		}
	}
	if writesIntoKilled(p) {
		return "writes into a killed child"
	}
	return ""
}

// Weights are profile's weights without what Comparable rejects.
func Weights(profile string) (gen.Weights, error) {
	w, err := gen.Profile(profile)
	if err != nil {
		return w, err
	}
	w.ODirect, w.Vmsplice, w.ReadPipe, w.UringReg, w.UringRead, w.UffdWP = 0, 0, 0, 0, 0, 0
	w.FailNthProb = 0
	w.ThreadProb, w.ThreadVMAProb = 0, 0
	return w, nil
}

// Generate returns the i-th program of seed under w (the same programs the
// hostcmp test and the modelcmp command run).
func Generate(seed uint64, i int, w gen.Weights) *prog.Program {
	return gen.Generate(rand.New(rand.NewPCG(seed, uint64(i))), w)
}

// Result is the comparison of one program.
type Result struct {
	Skip string // why it was not compared
	Err  error  // the target's error (a harness error or an event)
	// Diffs: kernel (a) against the model in Mode (b); Eager: against the
	// eager model; Models: Mode's model against the eager one.
	Diffs, Eager, Models []Diff
}

// One runs p on the target and the models and records the result.
func (c *ModelCmp) One(p *prog.Program) Result {
	if c.Classes == nil {
		c.Classes = map[string]*Class{}
	}
	if why := Comparable(p); why != "" {
		c.Skipped++
		return Result{Skip: why}
	}
	c.Programs++
	ko, err := c.Target.Run(p, agents.Options{})
	if err != nil {
		if _, ok := agents.AsEvent(err); ok {
			c.Events++
		} else {
			c.HarnessErrors++
		}
		if len(c.Errors) < 10 {
			c.Errors = append(c.Errors, fmt.Sprintf("%v\n%s", err, p.Format()))
		}
		return Result{Err: err}
	}
	seed := c.SchedSeed
	// The model follows the target kernel's release where Linux changed
	// behaviour.
	rel := ko.Kernel
	if c.Kernel != "" {
		rel = c.Kernel
	}
	mo, mk, err := sim.Run(p, sim.Config{Mode: c.Mode, SchedSeed: seed, Kernel: rel, Lacks: Lacks(p, ko)}, 0)
	if mk != nil {
		defer mk.Release()
	}
	if err != nil {
		return Result{Err: fmt.Errorf("simulated %s fork: %w", c.Mode, err)}
	}
	r := Result{Diffs: Diffs(p, ko, mo)}
	if c.Mode != sim.Eager {
		eo, ek, err := sim.Run(p, sim.Config{Mode: sim.Eager, SchedSeed: seed, Kernel: rel, Lacks: Lacks(p, ko)}, 0)
		if ek != nil {
			defer ek.Release()
		}
		if err != nil {
			return Result{Err: fmt.Errorf("simulated eager fork: %w", err)}
		}
		r.Eager = Diffs(p, ko, eo)
		r.Models = Diffs(p, mo, eo)
		if len(r.Models) > 0 {
			c.ModelsDiffer++
		}
	} else {
		r.Eager = r.Diffs
	}
	if len(r.Diffs) == 0 {
		c.Agree++
		return r
	}
	c.Differ++
	if len(r.Eager) == 0 {
		c.ModeOnly++
	}
	eagerClasses := map[string]bool{}
	for _, d := range r.Eager {
		eagerClasses[d.Class] = true
	}
	seen := map[string]bool{}
	for _, d := range r.Diffs {
		if seen[d.Class] {
			continue
		}
		seen[d.Class] = true
		cl := c.Classes[d.Class]
		if cl == nil {
			cl = &Class{Name: d.Class, Example: string(p.Format()), Text: d.Text, Known: Explain(d.Class)}
			c.Classes[d.Class] = cl
		}
		cl.Programs++
		if d.Class == r.Diffs[0].Class {
			cl.First++
		}
		if eagerClasses[d.Class] {
			cl.AlsoEager++
		}
	}
	return r
}

// Unexplained counts the differing programs' classes without a known
// explanation.
func (c *ModelCmp) Unexplained() []*Class {
	var out []*Class
	for _, cl := range c.sorted() {
		if cl.Known == "" {
			out = append(out, cl)
		}
	}
	return out
}

func (c *ModelCmp) sorted() []*Class {
	var cls []*Class
	for _, cl := range c.Classes {
		cls = append(cls, cl)
	}
	sort.Slice(cls, func(i, j int) bool {
		if cls[i].Programs != cls[j].Programs {
			return cls[i].Programs > cls[j].Programs
		}
		return cls[i].Name < cls[j].Name
	})
	return cls
}

// Report writes the summary and a Markdown table of the classes.
func (c *ModelCmp) Report(w io.Writer) {
	fmt.Fprintf(w, "%d programs compared with the simulated %s fork (%d generated ones skipped: not comparable): %d agree, %d differ, %d harness errors, %d events",
		c.Programs, c.Mode, c.Skipped, c.Agree, c.Differ, c.HarnessErrors, c.Events)
	if c.Mode != sim.Eager {
		fmt.Fprintf(w, "; %d of the differing programs agree with the simulated eager fork; the %s and eager models disagree on %d", c.ModeOnly, c.Mode, c.ModelsDiffer)
	}
	fmt.Fprintln(w)
	if len(c.Classes) > 0 {
		fmt.Fprintln(w, "\n| class (kernel/model) | programs | first difference in | also with the eager model | explanation |\n|---|---|---|---|---|")
		for _, cl := range c.sorted() {
			e := cl.Known
			if e == "" {
				e = "UNEXPLAINED: " + firstLine(cl.Text)
			}
			fmt.Fprintf(w, "| `%s` | %d | %d | %d | %s |\n", cl.Name, cl.Programs, cl.First, cl.AlsoEager, e)
		}
	}
	for _, e := range c.Errors {
		fmt.Fprintf(w, "\ntarget error: %s", e)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// writesIntoKilled reports whether a procmem or pvwrite targets a child
// that its parent killed.
func writesIntoKilled(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Into == 0 {
			continue
		}
		for _, k := range p.Ops {
			if k.Kind == prog.OpKill && k.Fork == op.Into-1 {
				return true
			}
		}
	}
	return false
}
