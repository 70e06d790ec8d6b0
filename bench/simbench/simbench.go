package simbench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/minimize"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// issues judges one run on the simulated kernel (checker/judge: the
// checker, the kernel's page-table events, injected failures excused).
func issues(p *prog.Program, o *obs.Observation) []judge.Issue {
	v, err := judge.Judge(p, o, nil)
	if err != nil {
		return []judge.Issue{{Oracle: checker.OracleObservation, Signature: "observation:missing", Explanation: err.Error()}}
	}
	return v.Issues
}

// HuntResult is the outcome of a bounded campaign against one mutant.
type HuntResult struct {
	Mutant    sim.Mutant
	Detected  bool
	Programs  int           // programs run up to and including the first detection
	Elapsed   time.Duration // time to first detection (or the whole budget)
	Signature string        // first finding's signature
	Text      string        // its explanation
	MinText   string        // the explanation on the minimized program
	Found     *prog.Program
	Minimized *prog.Program
	MinRuns   int
	Seed      uint64
	// FalseAlarms counts failing programs skipped because the unmodified
	// model failed them too.
	FalseAlarms int
}

// HuntConfig bounds a campaign.
type HuntConfig struct {
	Seed     uint64
	Budget   time.Duration // wall-clock bound per mutant
	Programs int           // program bound per mutant (0: none)
	// FailRate is the probability of an injected allocation failure per
	// fork (used only for mutants that need failures, see sim.Mutant.Needs).
	FailRate float64
	// MinimizeRuns bounds the runs spent minimizing (0: 2000).
	MinimizeRuns int
}

// Hunt runs generated programs against mutant m until an oracle fails or
// the budget is spent, then minimizes the first failing program while the
// same signature reproduces.
func Hunt(m sim.Mutant, hc HuntConfig) HuntResult {
	cfg := sim.Config{Mode: m.Mode, Mutant: m.Name, SchedSeed: hc.Seed}
	if m.Needs == "fail" {
		cfg.FailRate = hc.FailRate
		if cfg.FailRate == 0 {
			cfg.FailRate = 0.5
		}
	}
	t, err := sim.NewTarget(cfg)
	res := HuntResult{Mutant: m, Seed: hc.Seed}
	if err != nil {
		res.Text = err.Error()
		return res
	}
	ccfg := cfg
	ccfg.Mutant = ""
	clean, _ := sim.NewTarget(ccfg)
	w := gen.DefaultWeights()
	start := time.Now()
	for i := 0; hc.Programs == 0 || i < hc.Programs; i++ {
		if time.Since(start) > hc.Budget {
			break
		}
		p := gen.Generate(rand.New(rand.NewPCG(hc.Seed, uint64(i))), w)
		o, err := t.Run(p, agents.Options{})
		if err != nil {
			continue
		}
		is := issues(p, o)
		if len(is) == 0 {
			continue
		}
		// A finding counts only if the unmodified model (same mode, same
		// interleaving seed and failures) passes the same program: a
		// checker false positive is not a detection.
		if co, err := clean.Run(p, agents.Options{}); err != nil || len(issues(p, co)) > 0 {
			res.FalseAlarms++
			continue
		}
		res.Detected, res.Programs, res.Elapsed = true, i+1, time.Since(start)
		res.Signature, res.Text, res.Found = is[0].Signature, is[0].Explanation, p
		break
	}
	if !res.Detected {
		res.Elapsed = time.Since(start)
		return res
	}
	maxRuns := hc.MinimizeRuns
	if maxRuns <= 0 {
		maxRuns = 2000
	}
	sig := res.Signature
	res.Minimized, _ = minimize.Minimize(res.Found, func(q *prog.Program) bool {
		res.MinRuns++
		o, err := t.Run(q, agents.Options{})
		if err != nil {
			return false
		}
		for _, is := range issues(q, o) {
			if is.Signature == sig {
				return true
			}
		}
		return false
	}, minimize.MaxAttempts(maxRuns))
	if o, err := t.Run(res.Minimized, agents.Options{}); err == nil {
		for _, is := range issues(res.Minimized, o) {
			if is.Signature == sig {
				res.MinText = is.Explanation
				break
			}
		}
	}
	return res
}

// HuntAll hunts every mutant (of one mode, or all when mode < 0) and
// writes one line per mutant to w, then a summary.
func HuntAll(w io.Writer, mode int, hc HuntConfig) []HuntResult {
	var out []HuntResult
	fmt.Fprintf(w, "%-26s %-9s %-8s %9s %9s %7s  %s\n", "MUTANT", "FORK", "DETECTED", "TIME", "PROGRAMS", "MIN-OPS", "SIGNATURE")
	for _, m := range sim.Mutants() {
		if mode >= 0 && int(m.Mode) != mode {
			continue
		}
		r := Hunt(m, hc)
		out = append(out, r)
		det, minOps := "no", "-"
		if r.Detected {
			det = "yes"
			minOps = fmt.Sprint(len(r.Minimized.Ops))
		}
		fmt.Fprintf(w, "%-26s %-9v %-8s %9s %9d %7s  %s\n", m.Name, m.Mode, det,
			r.Elapsed.Round(time.Millisecond), r.Programs, minOps, r.Signature)
	}
	n := 0
	for _, r := range out {
		if r.Detected {
			n++
		}
	}
	fmt.Fprintf(w, "detected %d of %d mutants (seed %d, budget %v per mutant)\n", n, len(out), hc.Seed, hc.Budget)
	return out
}
