package agents

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// ForkImplTarget runs every program of Target under a fork-implementation
// profile (Options.ForkImpl) and checks the executor's per-fork evidence
// that the implementation took effect (obs.CheckForkImpl). A run whose
// evidence says a fork did not use the implementation is a harness error
// (*obs.ForkImplError), never a clean run: the program did not test what
// was asked.
//
// With Differential set it runs each program a second time with the
// "stock" profile and compares the two observations, independently of
// any reference model: the implementation must not change what any
// process saw or what any operation returned. A difference is an Event
// (*ForkImplDiff) naming the first differing operation or view.
type ForkImplTarget struct {
	Target
	Profile      string
	Differential bool
	// Log receives the summary on Close (nil: none).
	Log io.Writer

	mu           sync.Mutex
	undecidedRun int
	// Stats, for the summary.
	Runs, Forks, Deferred, Eager, Unknown, EvidenceErrors int
	WPPMDs, PMDReads                                      int
	// Late counts forks whose child ran while the counts were read.
	Late                         int
	Compared, DiffSkipped, Diffs int
	// Calibration is what Calibrate found ("" if it did not run).
	Calibration string
	// pending are events the calibration runs saw (TakePending).
	pending []Pending
}

// MaxUndecidedRuns: this many runs in a row with forks none of which could
// show whether the implementation took effect is a harness error.
const MaxUndecidedRuns = 5

// Unwrap is the target the profile is applied on.
func (t *ForkImplTarget) Unwrap() Target { return t.Target }

// Run runs p with the profile and checks the evidence.
func (t *ForkImplTarget) Run(p *prog.Program, opt Options) (*obs.Observation, error) {
	opt.ForkImpl = t.Profile
	o, err := t.Target.Run(p, opt)
	t.count(o)
	if err != nil {
		return o, err
	}
	if err := t.evidence(p, o); err != nil {
		t.mu.Lock()
		t.EvidenceErrors++
		if t.Log != nil {
			// A harness error is not saved as a finding: keep the program.
			fmt.Fprintf(t.Log, "fork-implementation evidence failed (%v) for this program:\n%s", err, p.Format())
		}
		t.mu.Unlock()
		return nil, err
	}
	// Only a deferring profile must show, now and then, that it took
	// effect. Under stock, an undecided fork (its child ran before the
	// parent looked: most stock forks of the Go executor under TCG) hides
	// no deferral the probe could have caught, as in Calibrate.
	if u := obs.Undecided(o); u != "" && obs.DeferredProfile(t.Profile) {
		t.mu.Lock()
		t.undecidedRun++
		n := t.undecidedRun
		t.mu.Unlock()
		if n >= MaxUndecidedRuns {
			return nil, &obs.ForkImplError{Profile: t.Profile, Msg: fmt.Sprintf("%d runs in a row where no fork could show whether it took effect, last: %s", n, u)}
		}
	} else if o.ForkImpl != nil && len(o.ForkImpl.Forks) > 0 {
		t.mu.Lock()
		t.undecidedRun = 0
		t.mu.Unlock()
	}
	if !t.Differential || t.Profile == "stock" {
		return o, nil
	}
	if why := DifferentialSkip(p); why != "" {
		t.mu.Lock()
		t.DiffSkipped++
		t.mu.Unlock()
		return o, nil
	}
	t.mu.Lock()
	t.Compared++
	t.mu.Unlock()
	ref := opt
	ref.ForkImpl = "stock"
	o2, err := t.Target.Run(p, ref)
	if err != nil {
		if _, ok := AsEvent(err); ok {
			return o, err
		}
		return nil, fmt.Errorf("differential run with stock fork: %w", err)
	}
	if err := t.evidence(p, o2); err != nil {
		return nil, fmt.Errorf("differential run with stock fork: %w", err)
	}
	if d := DiffObservations(p, o, o2); d != "" {
		t.mu.Lock()
		t.Diffs++
		t.mu.Unlock()
		return o, &ForkImplDiff{Profile: t.Profile, First: d, Program: string(p.Format())}
	}
	return o, nil
}

func (t *ForkImplTarget) count(o *obs.Observation) {
	if o == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Runs++
	if o.ForkImpl == nil {
		return
	}
	for _, f := range o.ForkImpl.Forks {
		t.Forks++
		switch f.Verdict {
		case obs.EvDeferred:
			t.Deferred++
		case obs.EvEager:
			t.Eager++
		default:
			t.Unknown++
		}
		if f.Late != "" {
			t.Late++
		} else if f.PMDsWP >= 0 {
			t.PMDReads++
			t.WPPMDs += f.PMDsWP
		}
	}
}

// Summary says what the evidence showed.
func (t *ForkImplTarget) Summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := fmt.Sprintf("fork implementation %s: %d runs, %d forks of the main process with evidence: %d deferred, %d eager, %d unknown; %d runs failed the evidence check",
		t.Profile, t.Runs, t.Forks, t.Deferred, t.Eager, t.Unknown, t.EvidenceErrors)
	if t.PMDReads > 0 {
		s += fmt.Sprintf("; forkfuzz_pmd read after %d forks: %d write-protected PMDs over the program's regions", t.PMDReads, t.WPPMDs)
	}
	if t.Late > 0 {
		s += fmt.Sprintf("; %d forks' page and PMD counts not used (the child ran while they were read)", t.Late)
	}
	if t.Differential {
		s += fmt.Sprintf("; differential: %d programs compared with stock fork, %d skipped, %d differed", t.Compared, t.DiffSkipped, t.Diffs)
	}
	if t.Calibration != "" {
		s += "; " + t.Calibration
	}
	return s
}

// Close prints the summary and closes the wrapped target.
func (t *ForkImplTarget) Close() error {
	if t.Log != nil {
		fmt.Fprintln(t.Log, t.Summary())
	}
	return t.Target.Close()
}

func (t *ForkImplTarget) evidence(p *prog.Program, o *obs.Observation) error {
	if o.ForkImpl == nil {
		return &obs.ForkImplError{Profile: t.Profile, Msg: fmt.Sprintf("target %s recorded no fork-implementation evidence (it cannot switch fork implementations)", t.Target.Name())}
	}
	return obs.CheckForkImpl(o)
}

// Parallel forwards the wrapped target's capability.
func (t *ForkImplTarget) Parallel() int { return Parallelism(t.Target) }

// DifferentialSkip says why a program cannot be compared across fork
// implementations ("" when it can): threads race with the fork, so what a
// child sees depends on timing; and fault injection counts allocations,
// which differ between implementations by design.
func DifferentialSkip(p *prog.Program) string {
	for _, op := range p.Ops {
		switch {
		case op.Thread != 0 || op.Kind == prog.OpStoreLoop || op.Kind == prog.OpJoin:
			return "threads race with forks: the views depend on timing"
		case op.FailNth > 0 || op.OOMMemcg > 0 || op.ChildFail > 0 || op.ChildOOM > 0:
			return "fault injection counts the fork's allocations, which differ between implementations"
		}
	}
	return ""
}

// DiffObservations returns the first difference between two observations
// of p ("" if none): operation results (errno, skip, data; return values
// except fork's pid), then views matched by process and place, then the
// final maps.
func DiffObservations(p *prog.Program, a, b *obs.Observation) string {
	killed := map[int]bool{} // forks killed so far
	for i := range p.Ops {
		if i >= len(a.Ops) || i >= len(b.Ops) {
			break
		}
		op := &p.Ops[i]
		if op.Kind == prog.OpKill {
			killed[op.Fork] = true
		}
		if (op.Kind == prog.OpProcMem || op.Kind == prog.OpPVWrite) && op.Into > 0 && killed[op.Into-1] {
			// Into a child killed earlier: whether it has exited yet
			// (and its memory is gone) is up to the scheduler.
			continue
		}
		x, y := a.Ops[i], b.Ops[i]
		ret := p.Ops[i].Kind != prog.OpFork
		if p.Ops[i].Kind == prog.OpMremap && !prog.InArena(x.Ret) && !prog.InArena(y.Ret) {
			// A move the arena had no room for lands wherever the
			// process's other mappings (the Go runtime's) leave space:
			// the place differs from run to run, whatever the fork.
			ret = false
		}
		if k := p.Ops[i].Kind; k == prog.OpMigrate || k == prog.OpMigrateLoop {
			// move_pages moves what it can: a page with a passing
			// extra reference (a deferred copy in flight, a pipe's, an
			// LRU batch's) stays, and the count of pages left differs
			// from run to run (docs/asyncfork/report.md, the gate of
			// 0004). Its errno is still compared.
			ret = false
		}
		switch {
		case x.Ran != y.Ran:
			return fmt.Sprintf("op %d (%s): ran %v vs %v", i, p.Ops[i].Kind, x.Ran, y.Ran)
		case x.Errno != y.Errno:
			return fmt.Sprintf("op %d (%s): errno %d vs %d", i, p.Ops[i].Kind, x.Errno, y.Errno)
		case ret && x.Ret != y.Ret:
			return fmt.Sprintf("op %d (%s): returned %#x vs %#x", i, p.Ops[i].Kind, x.Ret, y.Ret)
		case x.Skip != y.Skip:
			return fmt.Sprintf("op %d (%s): skipped %q vs %q", i, p.Ops[i].Kind, x.Skip, y.Skip)
		case x.Skipped != y.Skipped:
			return fmt.Sprintf("op %d (%s): %d vs %d store slots skipped", i, p.Ops[i].Kind, x.Skipped, y.Skipped)
		case !reflect.DeepEqual(x.Data, y.Data):
			return fmt.Sprintf("op %d (%s): read data differs", i, p.Ops[i].Kind)
		}
	}
	type key struct{ proc, at int }
	vb := map[key]*obs.View{}
	for i := range b.Views {
		vb[key{b.Views[i].Proc, b.Views[i].At}] = &b.Views[i]
	}
	for i := range a.Views {
		x := &a.Views[i]
		y, ok := vb[key{x.Proc, x.At}]
		name := viewName(x.Proc, x.At)
		if !ok {
			return fmt.Sprintf("view %s: only with the implementation on", name)
		}
		delete(vb, key{x.Proc, x.At})
		if d := diffView(x, y); d != "" {
			return fmt.Sprintf("view %s: %s", name, d)
		}
	}
	for k := range vb {
		return fmt.Sprintf("view %s: only with stock fork", viewName(k.proc, k.at))
	}
	if ma, mb := normMaps(a.Maps), normMaps(b.Maps); ma != mb {
		return "final /proc/self/maps of the main process differ:\n" + ma + "vs\n" + mb
	}
	return ""
}

func viewName(proc, at int) string {
	who := "main process"
	if proc > 0 {
		who = fmt.Sprintf("child of f%d", proc-1)
	}
	switch at {
	case obs.AtStart:
		return who + " at start"
	case obs.AtEnd:
		return who + " at end"
	}
	return fmt.Sprintf("%s at op %d", who, at)
}

// normMaps drops what differs between runs of one program: the device
// and inode of shared memory (a new shmem file per run).
func normMaps(m string) string {
	var b strings.Builder
	for _, l := range strings.Split(m, "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 {
			if f[4] != "0" {
				f[4] = "INODE"
			}
			f[3] = "DEV"
		}
		b.WriteString(strings.Join(f, " "))
		b.WriteByte('\n')
	}
	return b.String()
}

func diffView(x, y *obs.View) string {
	norm := func(v []obs.VMA) []obs.VMA {
		out := slices.Clone(v)
		for i := range out {
			if out[i].Inode != 0 {
				out[i].Inode = 1 // shmem inode numbers differ from run to run
			}
		}
		return out
	}
	if vx, vy := norm(x.VMAs), norm(y.VMAs); !reflect.DeepEqual(vx, vy) {
		return fmt.Sprintf("mappings differ: %v vs %v", vx, vy)
	}
	if !reflect.DeepEqual(x.Runs, y.Runs) {
		return fmt.Sprintf("page states differ: %v vs %v", x.Runs, y.Runs)
	}
	wy := map[[2]uint64]uint64{}
	for _, w := range y.Words {
		wy[[2]uint64{uint64(w.Region), w.Off}] = w.Value
	}
	for _, w := range x.Words {
		k := [2]uint64{uint64(w.Region), w.Off}
		if v := wy[k]; v != w.Value {
			return fmt.Sprintf("r%d+%#x holds %#x with the implementation, %#x with stock fork", w.Region, w.Off, w.Value, v)
		}
		delete(wy, k)
	}
	for k, v := range wy {
		return fmt.Sprintf("r%d+%#x holds 0 with the implementation, %#x with stock fork", k[0], k[1], v)
	}
	return ""
}

// ForkImplDiff is a finding of the differential oracle: one program, run
// with a fork implementation and with stock fork, gave different
// observations.
type ForkImplDiff struct {
	Profile string
	First   string // the first difference
	Program string
}

func (e *ForkImplDiff) Error() string {
	return fmt.Sprintf("%s and stock fork disagree: %s", e.Profile, firstLine(e.First))
}

// Oracle is "forkimpl-differential".
func (e *ForkImplDiff) Oracle() string { return "forkimpl-differential" }

// Signature keys on the profile and the kind of the first difference.
func (e *ForkImplDiff) Signature() string {
	kind := "op"
	switch {
	case strings.HasPrefix(e.First, "view"):
		kind = "view"
	case strings.HasPrefix(e.First, "final"):
		kind = "maps"
	}
	return e.Oracle() + "/" + e.Profile + "-" + kind
}

// Explanation says what differed.
func (e *ForkImplDiff) Explanation() string {
	return fmt.Sprintf("the same program run with fork implementation %s and with stock fork gave different observations; first difference: %s\n", e.Profile, e.First)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ForkImpls for the host kernel.
func (n *Native) ForkImpls() []string { return executor.AvailableForkImpls() }

// NewForkImplTarget wraps t; it fails (a harness error) when the profile
// is unknown or t's kernel is known to lack its knob.
func NewForkImplTarget(t Target, profile string, differential bool) (*ForkImplTarget, error) {
	p, err := executor.LookupForkImpl(profile)
	if err != nil {
		return nil, err
	}
	l, ok := t.(ForkImplLister)
	if !ok {
		return nil, fmt.Errorf("--fork-impl %s: the %s target cannot switch fork implementations (it runs no executor on a real kernel)", profile, t.Name())
	}
	have := l.ForkImpls()
	if !slices.Contains(have, profile) {
		return nil, fmt.Errorf("--fork-impl %s: the %s target's kernel does not have it (no %s; it has: %s)", profile, t.Name(), p.Knob, strings.Join(have, ", "))
	}
	return &ForkImplTarget{Target: t, Profile: profile, Differential: differential}, nil
}

// CalibrationProgram is the program Calibrate runs: one region of two
// whole PMDs (Async-fork defers only PMDs a VMA covers in full), written
// in full, one fork, the child's look and the wait. Few operations, so
// the parent has few chances to block and let the child run before the
// evidence is read.
const CalibrationProgram = `forkfuzz v1
region r0 anon-private pages=1024 thp=off
store r0 off=0x0 count=1024 stride=0x1000
fork f0
f0: check
wait f0
`

// MaxCalibrationRuns bounds Calibrate's runs.
const MaxCalibrationRuns = 10

// Calibrate is the definitive check at the start of a campaign: it runs
// CalibrationProgram under the profile until a fork decides (at most
// MaxCalibrationRuns runs). A fork that did not use the implementation
// (eager under a deferring profile, deferred under "stock") is a
// *obs.ForkImplError, so a campaign on which the mode did not take effect
// stops before its first program instead of at its first eager fork. For
// a deferring profile, no decision in MaxCalibrationRuns runs is an error
// too (the evidence cannot work on this target); for "stock" it is not
// (an eager fork is only proven while the child stays off the CPU, which
// a loaded machine does not always allow), Calibration says so.
// Calibration runs are not counted in the summary's run figures.
func (t *ForkImplTarget) Calibrate() error {
	p, err := prog.Parse([]byte(CalibrationProgram))
	if err != nil {
		return fmt.Errorf("calibration program: %w", err)
	}
	want := obs.EvEager
	if obs.DeferredProfile(t.Profile) {
		want = obs.EvDeferred
	}
	var last string
	for i := 1; i <= MaxCalibrationRuns; i++ {
		opt := Options{ForkImpl: t.Profile}
		o, err := t.Target.Run(p, opt)
		if _, ev := AsEvent(err); ev {
			// The kernel broke on the calibration program (a BUG on its
			// first fork): the clearest finding there is. It is kept for
			// the campaign to save (TakePending), which then stops.
			t.mu.Lock()
			t.pending = append(t.pending, Pending{Program: p, Options: opt, Err: err,
				Note: fmt.Sprintf("the fork-implementation calibration program (agents.CalibrationProgram, --fork-impl %s), run %d, before the campaign's first program", t.Profile, i)})
			t.Calibration = fmt.Sprintf("calibration: run %d ended with %v (saved as a finding)", i, err)
			t.mu.Unlock()
			return nil
		}
		if err != nil {
			return fmt.Errorf("--fork-impl %s: calibration run %d: %w", t.Profile, i, err)
		}
		if o.ForkImpl == nil {
			return &obs.ForkImplError{Profile: t.Profile, Msg: fmt.Sprintf("calibration: target %s recorded no fork-implementation evidence", t.Target.Name())}
		}
		if err := obs.CheckForkImpl(o); err != nil {
			return fmt.Errorf("calibration run %d: %w", i, err)
		}
		if u := obs.Undecided(o); u != "" {
			last = u
			continue
		}
		if len(o.ForkImpl.Forks) == 0 {
			return &obs.ForkImplError{Profile: t.Profile, Msg: "calibration: the fork failed"}
		}
		t.mu.Lock()
		t.Calibration = fmt.Sprintf("calibration: fork %s (run %d of at most %d)", want, i, MaxCalibrationRuns)
		t.mu.Unlock()
		return nil
	}
	msg := fmt.Sprintf("calibration: no fork decided in %d runs, last: %s", MaxCalibrationRuns, last)
	if want == obs.EvDeferred {
		return &obs.ForkImplError{Profile: t.Profile, Msg: msg}
	}
	t.mu.Lock()
	t.Calibration = msg + " (stock: not an error; no fork was deferred)"
	t.mu.Unlock()
	return nil
}

// TakePending returns the events the calibration saw (once).
func (t *ForkImplTarget) TakePending() []Pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending
	t.pending = nil
	return p
}

// ForkImplOf is the fork-implementation profile t (or a target it wraps)
// applies, "" when none: the kernel's own fork.
func ForkImplOf(t Target) string {
	for t != nil {
		if f, ok := t.(*ForkImplTarget); ok {
			return f.Profile
		}
		w, ok := t.(Wrapper)
		if !ok {
			return ""
		}
		t = w.Unwrap()
	}
	return ""
}
