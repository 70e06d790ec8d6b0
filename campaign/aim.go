package campaign

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// A fork's K-th failure point (fail_nth=K) is the K-th allocation fork
// makes, and the executor's own mappings are copied before or after the
// program's: when the Go runtime's mappings differ from the run that
// showed a finding, the same K fails another allocation, and the finding
// does not come back (docs/rollback.md, "Replaying fail_nth"). Every run
// records where the fault hit (obs.Rollback.Site); a replay aims at the
// site the finding's run recorded, trying the K nearby until the kernel
// reports the same one.

// aimWindow bounds how far from the recorded K aiming looks, either way.
const aimWindow = 12

// AimRuns is the most runs Aim needs for one fork: K and aimWindow
// either side.
const AimRuns = 2*aimWindow + 1

// AimSites returns, by fork operation, the injection site each fork with
// fail_nth hit in observation o (forks whose fault was injected and whose
// site the kernel reported).
func AimSites(o *obs.Observation) map[int]string {
	if o == nil {
		return nil
	}
	var out map[int]string
	for _, rb := range o.Rollbacks {
		if rb.Cause != obs.CauseFailNth || rb.Injection != obs.InjInjected || rb.Site == "" || rb.FailNth <= 0 {
			continue
		}
		if out == nil {
			out = map[int]string{}
		}
		out[rb.Op] = rb.Site
	}
	return out
}

// OnSite says whether every fork of sites hit its site in o.
func OnSite(o *obs.Observation, sites map[int]string) bool {
	for op, want := range sites {
		if siteOf(o, op) != want {
			return false
		}
	}
	return true
}

// siteOf returns the injection site fork operation op hit in o ("" if
// none was injected or reported).
func siteOf(o *obs.Observation, op int) string {
	if o == nil {
		return ""
	}
	for _, rb := range o.Rollbacks {
		if rb.Op == op && rb.Cause == obs.CauseFailNth && rb.Injection == obs.InjInjected {
			return rb.Site
		}
	}
	return ""
}

// Aim returns p with the fail_nth of each fork in sites moved to where
// the kernel reports the recorded site, if a run of p hits another one;
// at most maxRuns runs. note says what moved, or why nothing could be
// aimed; runs is what it spent.
func Aim(ctx context.Context, t agents.Target, p *prog.Program, sites map[int]string, opt agents.Options, maxRuns int) (q *prog.Program, note string, runs int) {
	q = p
	var notes []string
	for _, i := range slices.Sorted(maps.Keys(sites)) {
		want := sites[i]
		if i < 0 || i >= len(q.Ops) || q.Ops[i].Kind != prog.OpFork || q.Ops[i].FailNth <= 0 {
			continue
		}
		k0 := q.Ops[i].FailNth
		try := func(k int) bool {
			if runs >= maxRuns || ctx.Err() != nil {
				return false
			}
			c := q.Clone()
			c.Ops[i].FailNth = k
			runs++
			o, err := t.Run(c, opt)
			if err != nil || siteOf(o, i) != want {
				return false
			}
			q = c
			return true
		}
		if try(k0) {
			notes = append(notes, fmt.Sprintf("fork f%d fail_nth=%d hit the recorded site again", q.Ops[i].Fork, k0))
			continue
		}
		found := false
		for d := 1; d <= aimWindow && !found && runs < maxRuns; d++ {
			found = try(k0+d) || k0-d > 0 && try(k0-d)
		}
		f := q.Ops[i].Fork
		if found {
			notes = append(notes, fmt.Sprintf("fork f%d fail_nth=%d hit another site; fail_nth=%d hits the recorded one (%s)", f, k0, q.Ops[i].FailNth, want))
		} else {
			notes = append(notes, fmt.Sprintf("fork f%d: no fail_nth within %d of %d hit the recorded site (%s) in %d runs", f, aimWindow, k0, want, runs))
		}
	}
	return q, strings.Join(notes, "; "), runs
}

// stepAimRuns bounds the runs aiming one minimization step may take.
const stepAimRuns = 9

// aimStep handles a minimization candidate q that did not reproduce in
// its run (observation o): removing an operation that maps memory before
// the failing allocation moves fail_nth's K-th point. When q has one
// fork with fail_nth, sites one site, and the run hit another, it returns
// q aimed at the site (nil if none nearby hits it) and the runs spent, at
// most maxRuns.
func aimStep(ctx context.Context, t agents.Target, q *prog.Program, o *obs.Observation, sites map[int]string, opt agents.Options, maxRuns int) (*prog.Program, int) {
	if len(sites) != 1 || o == nil || maxRuns <= 0 {
		return nil, 0
	}
	var want string
	for _, s := range sites {
		want = s
	}
	fork := -1
	for i := range q.Ops {
		if q.Ops[i].Kind == prog.OpFork && q.Ops[i].FailNth > 0 {
			if fork >= 0 {
				return nil, 0
			}
			fork = i
		}
	}
	if fork < 0 || siteOf(o, fork) == want {
		return nil, 0
	}
	a, _, runs := Aim(ctx, t, q, map[int]string{fork: want}, opt, min(maxRuns, stepAimRuns))
	if a == q {
		return nil, runs
	}
	return a, runs
}
