// Package sweep drives fork into every failure point it has: for each fork
// of the main process of a program, it runs the program with fail_nth=K on
// that fork for K = 1, 2, ... until the fork passes all its failure points
// without consuming the fault (the kernel's fail-nth reads back non-zero),
// judging every run with all oracles. Every run's program carries its
// fail_nth, so a finding replays exactly.
//
// With Options.Child it sweeps the child's side of each fork instead
// (prog.Op.ChildFail): the failure points the child reaches in its own
// context before user space, which under Async-fork are its copy of the
// parent's page tables; it ends when the child passes them all (its
// fail-nth reads back non-zero when it stops at user space).
package sweep

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Options tune a sweep.
type Options struct {
	// MaxK stops the sweep of one fork after this many failure points
	// (0: 100000); the result says the fork was not swept to its end.
	MaxK int
	// Stride tries K = 1, 1+Stride, 1+2*Stride, ... (0 or 1: every K).
	// The sweep ends when K is past the fork's last failure point; the
	// count of failure points is exact either way (fail-nth reads back how
	// many were left).
	Stride int
	// Forks limits the sweep to these fork numbers (nil: every fork of the
	// main process).
	Forks []int
	// Log receives one line per run (nil: none).
	Log io.Writer
	// Child sweeps the child's failure points (childfail=K) instead of
	// the fork's (fail_nth=K).
	Child bool
	// ChildOOMStep, with Child, sweeps memory cgroup limits on the
	// child's side instead (child_oom=K*ChildOOMStep bytes), until the
	// child stays within one.
	ChildOOMStep uint64
	// Settle, when positive, runs up to this many probes before the
	// sweep of a fork (fail_nth far past the end: no fault, the kernel
	// reads back how many points were left) until three in a row count
	// the same number of failure points. A fresh executor's first
	// programs still grow what fork copies (docs/rollback.md, "Replaying
	// fail_nth"): without settling, the K-th point of the sweep's first
	// runs is not the K-th of its last. The result records the probes
	// and whether the count moved during the sweep. Not for Child sweeps.
	Settle int
	// ProgramPart ends the sweep of a fork at the first K whose failure
	// struck past the program's memory (obs.PartRuntime: the Go
	// runtime's VMAs, whose failure points move from run to run); every
	// K after it fails in the same state of the program's regions (all
	// copied). Needs an `arena low` program (the executor's sentinel);
	// elsewhere the sweep runs to its end and says why.
	ProgramPart bool
}

// ProbeK is the fail_nth of a settling probe: past any fork's last
// failure point.
const ProbeK = 100000

// Finding is one issue found at one failure point.
type Finding struct {
	Fork, K int
	Issue   judge.Issue
	Program *prog.Program // the program that found it, with fail_nth=K
}

// ForkResult is the sweep of one fork.
type ForkResult struct {
	Fork, Op int
	// Points is the number of failure points fork passed with this program:
	// K = Points+1 was never reached. -1 if the sweep stopped earlier.
	Points int
	// Runs, and of those: Failed (fork returned an error), Tolerated (the
	// fault was injected but fork returned success: the kernel handled
	// the failed allocation, or, under Async-fork, it hit the child's
	// copy after fork returned).
	Runs, Failed, Tolerated int
	Errnos                  map[int]int // errno -> runs
	// Sites counts the runs by where the kernel said the fault struck
	// (obs.Rollback.Site; SilentSite for an allocation that asks for no
	// warning, obs.Rollback.Silent; "" when it did not say otherwise).
	Sites map[string]int
	// Child sweeps only: runs whose child died before user space
	// (ChildKilled; by signal in ChildSignals, 0: it exited), whose child
	// reached user space although the fault was injected
	// (ChildSurvived), and where the fault struck (Phases:
	// obs.ChildFault.Phase, "" when the kernel did not say).
	// Unarmed counts runs repeated because the child had run before it
	// was armed.
	ChildKilled, ChildSurvived, Unarmed int
	// ChildOOMStep: a child_oom sweep in steps of this many bytes; Points
	// is then the number of limits the child ran into.
	ChildOOMStep uint64
	ChildSignals map[int]int
	Phases       map[string]int
	Elapsed      time.Duration
	Stopped      string // why the sweep of this fork ended
	Findings     []Finding
	// Probes are the failure-point counts of the settling probes, in
	// order (Options.Settle); Settled is set when the last three agreed.
	// Moved says how the count at the sweep's end differs from the
	// settled one ("" when it does not, or there were no probes).
	Probes  []int
	Settled bool
	Moved   string
	// ProgramPoints is how many of the failure points lie in the
	// program's part (fork's set-up, the executor's image, the program's
	// regions: the same on every run): the last K whose failed fork
	// stopped there (obs.PartProgram) before the first that stopped past
	// it. -1 when unknown (no measurement, or no K past the program).
	// Parts counts failed runs by obs.Rollback.Part ("" unmeasured);
	// PartNote says why there was no measurement, or that the parts were
	// not in order (a "program" K after a "runtime" one).
	// With Stride > 1 the line lies somewhere in ProgramPoints..
	// ProgramPointsMax (equal when every K was tried).
	ProgramPoints, ProgramPointsMax int
	Parts                           map[string]int
	PartNote                        string
}

// Result is a whole sweep.
type Result struct {
	Forks   []ForkResult
	Elapsed time.Duration
}

// UnsupportedError says the target cannot inject faults into fork.
type UnsupportedError struct{ Reason string }

func (e *UnsupportedError) Error() string {
	return "fault injection into fork is not available on this target: " + e.Reason
}

// Run sweeps the forks of p on target t. It returns an *UnsupportedError
// when the target cannot inject faults (never a clean result), and other
// errors when the harness fails.
func Run(t agents.Target, p *prog.Program, o Options) (*Result, error) {
	if o.MaxK <= 0 {
		o.MaxK = 100000
	}
	if o.Stride <= 0 {
		o.Stride = 1
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	want := map[int]bool{}
	for _, f := range o.Forks {
		want[f] = true
	}
	start := time.Now()
	res := &Result{}
	for i, op := range p.Ops {
		if op.Kind != prog.OpFork || op.Proc != 0 || (len(want) > 0 && !want[op.Fork]) {
			continue
		}
		fr, err := sweepFork(t, p, i, o)
		if err != nil {
			return res, err
		}
		res.Forks = append(res.Forks, *fr)
	}
	if len(res.Forks) == 0 {
		return nil, errors.New("sweep: the program has no fork of the main process to sweep")
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// forkSweep is the sweep of one fork in progress.
type forkSweep struct {
	t    agents.Target
	p    *prog.Program
	i    int // the fork's operation
	o    Options
	f    int // the fork
	fr   *ForkResult
	seen map[string]bool // signatures found so far
	// lastProgram is the last K that stopped in the program's part;
	// firstRuntime the first that stopped in the runtime's.
	lastProgram, firstRuntime int
	retries                   int // runs in a row the child was armed late
}

func sweepFork(t agents.Target, p *prog.Program, i int, o Options) (*ForkResult, error) {
	f := p.Ops[i].Fork
	fr := &ForkResult{Fork: f, Op: i, Points: -1, ProgramPoints: -1, ProgramPointsMax: -1, Errnos: map[int]int{}, Sites: map[string]int{}, Parts: map[string]int{}}
	if o.Child {
		fr.ChildSignals, fr.Phases, fr.ChildOOMStep = map[int]int{}, map[string]int{}, o.ChildOOMStep
	}
	sw := &forkSweep{t: t, p: p, i: i, o: o, f: f, fr: fr, seen: map[string]bool{}}
	start := time.Now()
	defer func() { fr.Elapsed = time.Since(start) }()
	if o.Settle > 0 && !o.Child {
		if err := settle(t, p, i, o, fr, sw.judgeRun); err != nil {
			return fr, err
		}
		defer func() {
			if n := len(fr.Probes); n > 0 && fr.Points >= 0 && fr.Points != fr.Probes[n-1] {
				fr.Moved = fmt.Sprintf("the count moved during the sweep: %d before it, %d at its end; K values near the change may name different failure points", fr.Probes[n-1], fr.Points)
			}
		}()
	}
	for k := 1; k <= o.MaxK; k += o.Stride {
		q, attr := sw.faulted(k)
		ob, runErr := t.Run(q, agents.Options{})
		fr.Runs++
		v, err := sw.judgeRun(q, k, ob, runErr, attr)
		if err != nil {
			return fr, err
		}
		if ob == nil {
			// The executor or the kernel died: the fault is somewhere in
			// there, but its outcome is unknown. Go on with the next K.
			logf(o.Log, "fork f%d %s=%d: no observation (%v)", f, attr, k, runErr)
			continue
		}
		rb := rollbackOf(ob, i)
		if rb == nil {
			if v.OK() {
				return fr, fmt.Errorf("sweep fork f%d at %s=%d: the observation has no rollback measurement", f, attr, k)
			}
			continue // judged above (rollback:missing, a crash, ...)
		}
		var done bool
		if o.Child {
			var again bool
			again, done, err = sw.child(rb, attr, k, len(v.Issues))
			if again {
				k -= o.Stride
			}
		} else {
			done, err = sw.parent(rb, k, len(v.Issues))
		}
		if done || err != nil {
			return fr, err
		}
	}
	fr.Stopped = fmt.Sprintf("stopped at the limit of %d failure points", o.MaxK)
	return fr, nil
}

// judgeRun judges one run and keeps the first program of each new
// signature.
func (sw *forkSweep) judgeRun(q *prog.Program, k int, ob *obs.Observation, runErr error, attr string) (*judge.Verdict, error) {
	v, err := judge.Judge(q, ob, runErr)
	if err != nil {
		return nil, fmt.Errorf("sweep fork f%d at %s=%d: %w", sw.f, attr, k, err)
	}
	for _, is := range v.Issues {
		if !sw.seen[is.Signature] {
			sw.seen[is.Signature] = true
			sw.fr.Findings = append(sw.fr.Findings, Finding{Fork: sw.f, K: k, Issue: is, Program: q})
		}
	}
	return v, nil
}

// faulted is the program with the fault at K armed on the swept fork
// (and no other), and the attribute that arms it.
func (sw *forkSweep) faulted(k int) (*prog.Program, string) {
	q, i, o := sw.p.Clone(), sw.i, sw.o
	for j := range q.Ops {
		q.Ops[j].FailNth, q.Ops[j].ChildFail, q.Ops[j].ChildOOM = 0, 0, 0
	}
	attr := "fail_nth"
	switch {
	case o.Child && o.ChildOOMStep > 0:
		q.Ops[i].ChildOOM, attr = uint64(k)*o.ChildOOMStep, "child_oom/step"
		q.Ops[i].OOMMemcg = 0
	case o.Child:
		q.Ops[i].ChildFail, attr = k, "childfail"
		q.Ops[i].OOMMemcg, q.Ops[i].ChildOOM = 0, 0
	default:
		q.Ops[i].FailNth = k
	}
	return q, attr
}

// child takes in a run of the child's fault at K: again says to run K
// again (the child was armed late), done that the sweep is over.
func (sw *forkSweep) child(rb *obs.Rollback, attr string, k, issues int) (again, done bool, err error) {
	if c := rb.Child; c != nil && c.Ran != "" && c.FailNth > 0 && c.Injection != obs.InjUnsupported {
		// The child ran before it was armed: it may have passed failure
		// points unarmed, so this run says nothing about K. Run K again.
		sw.fr.Unarmed++
		logf(sw.o.Log, "fork f%d %s=%d: armed late (%s), %s, child %s; running it again", sw.f, attr, k, c.Ran, c.Injection, c.Outcome)
		if sw.retries++; sw.retries > maxUnarmed {
			return false, false, fmt.Errorf("sweep fork f%d at %s=%d: the child ran before it was armed %d times in a row (%s)", sw.f, attr, k, sw.retries, c.Ran)
		}
		return true, false, nil
	}
	sw.retries = 0
	done, err = childRun(sw.fr, rb, attr, k, issues, sw.o.Log)
	return false, done, err
}

// SilentSite is the Sites key of faults the kernel injected without a
// report (obs.Rollback.Silent).
const SilentSite = "(no report: an allocation that asks for no warning, __GFP_NOWARN, fails silently)"

// parent takes in a run of fail_nth=K on the fork: the errno, the site
// and the part of memory where it stopped; done says the sweep is over.
func (sw *forkSweep) parent(rb *obs.Rollback, k, issues int) (done bool, err error) {
	fr, o := sw.fr, sw.o
	if rb.Injection == obs.InjUnsupported {
		return true, &UnsupportedError{rb.Reason}
	}
	if rb.Errno != 0 {
		fr.Failed++
		fr.Errnos[rb.Errno]++
	} else if rb.Injection == obs.InjInjected {
		fr.Tolerated++
	}
	if rb.Injection == obs.InjInjected {
		site := rb.Site
		if rb.Silent {
			site = SilentSite
		}
		fr.Sites[site]++
	}
	if rb.Errno != 0 && rb.Injection == obs.InjInjected {
		sw.part(rb, k)
	}
	logf(o.Log, "fork f%d fail_nth=%d: %s, errno %d, %d issues; %s%s", sw.f, k, rb.Injection, rb.Errno, issues, rb.Site, partSuffix(rb))
	if o.ProgramPart && sw.firstRuntime == k {
		fr.Stopped = fmt.Sprintf("fail_nth=%d stopped past the program's memory (--program-part): the points after it are the Go runtime's, which move from run to run", k)
		return true, nil
	}
	if rb.Injection == obs.InjNotReached {
		// fail-nth counts down once per failure point: fork passed
		// k - Remaining of them.
		fr.Points = k - rb.Remaining
		fr.Stopped = fmt.Sprintf("fork passed all its failure points: fail_nth=%d read back %d", k, rb.Remaining)
		return true, nil
	}
	return false, nil
}

// part counts the part of memory (the program's, the runtime's) where
// the failed fork at K stopped, and notes what is out of order.
func (sw *forkSweep) part(rb *obs.Rollback, k int) {
	fr := sw.fr
	fr.Parts[rb.Part]++
	switch rb.Part {
	case obs.PartProgram:
		if sw.firstRuntime > 0 && fr.PartNote == "" {
			fr.PartNote = fmt.Sprintf("out of order: fail_nth=%d stopped in the program's part after fail_nth=%d had stopped past it (did the runtime map memory below the arena?)", k, sw.firstRuntime)
		}
		sw.lastProgram = k
	case obs.PartRuntime:
		if sw.firstRuntime == 0 {
			sw.firstRuntime = k
			if fr.PartNote == "" && sw.lastProgram > 0 {
				fr.ProgramPoints, fr.ProgramPointsMax = sw.lastProgram, k-1
			} else if fr.PartNote == "" {
				fr.PartNote = fmt.Sprintf("the first failed run (fail_nth=%d) already stopped past the program's memory (did the runtime map memory below the arena?)", k)
			}
		}
	case "":
		if fr.PartNote == "" {
			why := rb.PartUnknown
			if why == "" {
				why = "the target does not measure it"
			}
			fr.PartNote = "not measured: " + why
		}
	}
}

func partSuffix(rb *obs.Rollback) string {
	if rb.Part == "" {
		return ""
	}
	return " [stopped in the " + rb.Part + "'s part]"
}

// settle runs the probes of Options.Settle before the sweep of fork op i
// and records their counts in fr. Probe runs are judged like any run (no
// fault is injected); they are not counted in fr.Runs.
func settle(t agents.Target, p *prog.Program, i int, o Options, fr *ForkResult,
	judgeRun func(*prog.Program, int, *obs.Observation, error, string) (*judge.Verdict, error)) error {
	q := p.Clone()
	for j := range q.Ops {
		q.Ops[j].FailNth, q.Ops[j].ChildFail, q.Ops[j].ChildOOM = 0, 0, 0
	}
	q.Ops[i].FailNth = ProbeK
	for n := 0; n < o.Settle; n++ {
		ob, runErr := t.Run(q, agents.Options{})
		if _, err := judgeRun(q, ProbeK, ob, runErr, "fail_nth (probe)"); err != nil {
			return err
		}
		if ob == nil {
			logf(o.Log, "fork f%d probe %d: no observation (%v)", fr.Fork, n+1, runErr)
			continue
		}
		rb := rollbackOf(ob, i)
		switch {
		case rb == nil:
			logf(o.Log, "fork f%d probe %d: no rollback measurement", fr.Fork, n+1)
			continue
		case rb.Injection == obs.InjUnsupported:
			return &UnsupportedError{rb.Reason}
		case rb.Injection != obs.InjNotReached:
			logf(o.Log, "fork f%d probe %d: fail_nth=%d was %s; no count", fr.Fork, n+1, ProbeK, rb.Injection)
			continue
		}
		fr.Probes = append(fr.Probes, ProbeK-rb.Remaining)
		logf(o.Log, "fork f%d probe %d: %d failure points", fr.Fork, n+1, ProbeK-rb.Remaining)
		if m := len(fr.Probes); m >= 3 && fr.Probes[m-1] == fr.Probes[m-2] && fr.Probes[m-2] == fr.Probes[m-3] {
			fr.Settled = true
			return nil
		}
	}
	return nil
}

// childRun accounts one run of a child sweep; done ends the sweep.
func childRun(fr *ForkResult, rb *obs.Rollback, attr string, k, issues int, log io.Writer) (done bool, err error) {
	cf := rb.Child
	switch {
	case rb.Errno != 0:
		// The parent's fork failed without injection (ENOMEM, say):
		// there was no child to inject into.
		fr.Failed++
		fr.Errnos[rb.Errno]++
		logf(log, "fork f%d %s=%d: the fork itself failed with errno %d, %d issues", fr.Fork, attr, k, rb.Errno, issues)
		return false, nil
	case cf == nil:
		return true, fmt.Errorf("sweep fork f%d at %s=%d: the rollback measurement has no record of the child's fault", fr.Fork, attr, k)
	case cf.Injection == obs.InjUnsupported:
		return true, &UnsupportedError{cf.Reason}
	}
	if cf.Outcome == obs.ChildDied {
		fr.ChildKilled++
		fr.ChildSignals[cf.Signal]++
	}
	if cf.Injection == obs.InjInjected {
		site := cf.Site
		if cf.Silent {
			site = SilentSite
		}
		fr.Sites[site]++
		fr.Phases[cf.Phase]++
		if cf.Outcome == obs.ChildStopped {
			fr.ChildSurvived++
		}
	}
	logf(log, "fork f%d %s=%d: %s, child %s (signal %d), %d issues; %s %s %s", fr.Fork, attr, k, cf.Injection, cf.Outcome, cf.Signal, issues, cf.Phase, cf.Site, cf.Memcg)
	if cf.Injection == obs.InjNotReached && cf.ChildOOM > 0 {
		fr.Points = k - 1
		fr.Stopped = fmt.Sprintf("the child stayed within its memory cgroup limit: child_oom=%d (%s)", cf.ChildOOM, cf.Memcg)
		return true, nil
	}
	if cf.Injection == obs.InjNotReached {
		fr.Points = k - cf.Remaining
		fr.Stopped = fmt.Sprintf("the child passed all its failure points before user space: childfail=%d read back %d", k, cf.Remaining)
		return true, nil
	}
	return false, nil
}

// maxUnarmed bounds the repeats of one K whose child ran before it was
// armed.
const maxUnarmed = 8

func rollbackOf(o *obs.Observation, op int) *obs.Rollback {
	for j := range o.Rollbacks {
		if o.Rollbacks[j].Op == op {
			return &o.Rollbacks[j]
		}
	}
	return nil
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
