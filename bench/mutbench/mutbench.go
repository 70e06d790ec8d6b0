// Package mutbench is the kernel mutation benchmark: for each bug that
// kernel.MutantsPatch plants in Linux 6.1 it boots the mutated kernel with
// the bug switched on (forkfuzz_mutant=NAME), runs a campaign until the
// first finding or the budget, minimizes and replays that finding, and
// prints one table row; then the same budget on the build with no mutant
// switched on, which must stay clean. It is sim-bench (bench/simbench)
// for a real kernel.
package mutbench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/report"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// Baseline is the name of the row that runs the build with no mutant on.
const Baseline = "(unmutated)"

// Opener boots the kernel under test with cmdline appended to its command
// line ("" for the baseline), keeping what it writes (VM consoles) under
// dir, and returns the target and the `forkfuzz exec` flags that reopen
// it (recorded in findings).
type Opener func(cmdline, dir string) (t agents.Target, replayArgs []string, k campaign.KernelID, err error)

// Config bounds and describes the benchmark.
type Config struct {
	Mutants  []kernel.Mutant
	Baseline bool // also run the unmutated build over the same budget
	Open     Opener
	// Planted, when set, checks after a row that the kernel really ran
	// with m switched on (for the baseline: with none), from what Open
	// kept in dir; an error marks the row failed.
	Planted  func(m kernel.Mutant, dir string) error
	Seed     uint64        // the same campaign seed for every row
	Budget   time.Duration // per row, to the first finding
	Programs int           // per row (0: no bound)
	Weights  gen.Weights
	Workdir  string // ROW/findings for each row
	// MinimizeRuns and MinimizeTime bound minimizing one finding (its
	// replays, campaign.Finding.Replays, come after).
	MinimizeRuns int
	MinimizeTime time.Duration
	// Blind: the campaigns ignore kernel coverage (campaign.Config.Blind),
	// to compare time to each bug with and without guidance.
	Blind bool
	// NoStates: guided by KCOV edges only (campaign.Config.NoStates).
	NoStates bool
	// CoverEvery: campaign.Config.CoverEvery (0: the mode's default).
	CoverEvery int
	// SeedCorpus: every row's campaign starts from a copy of this kept
	// coverage corpus (campaign.Config.SeedCorpus), as a campaign that
	// keeps its corpus would, instead of from an empty one.
	SeedCorpus string
	// Results, when set, is a results file (ResultsFile) each row's
	// Record is appended to as the row ends.
	Results string
	// Log receives campaign lines; Progress the campaigns' progress lines.
	Log, Progress io.Writer
}

// Result is one row.
type Result struct {
	Name     string // mutant name, or Baseline
	Mutant   kernel.Mutant
	Found    bool          // a finding (for the baseline: a false alarm)
	Findings int64         // unique findings of the row's campaign
	Time     time.Duration // to the first finding (not found: the campaign's length)
	Programs int64         // programs run up to the first finding (not found: all)
	OrigOps  int           // the finding's program
	MinOps   int           // after minimizing
	// Reproduced of Replays runs of the minimized program showed the
	// finding's signature again.
	Reproduced, Replays int
	Oracle, Signature   string
	Dir                 string // the finding's directory
	Err                 error  // the row could not run (boot failure, harness errors)
}

// Run runs every row in order and writes the table to w as it goes.
func Run(ctx context.Context, cfg Config, w io.Writer) []Result {
	fmt.Fprintln(w, Header())
	var out []Result
	rows := append([]kernel.Mutant(nil), cfg.Mutants...)
	if cfg.Baseline {
		rows = append(rows, kernel.Mutant{Name: Baseline})
	}
	for _, m := range rows {
		if ctx.Err() != nil {
			break
		}
		r := runOne(ctx, cfg, m)
		out = append(out, r)
		fmt.Fprintln(w, r.Row())
		if cfg.Results != "" && ctx.Err() == nil {
			// A row cut short by an interrupt is not a result.
			if err := appendRecord(cfg.Results, r.Record(cfg)); err != nil {
				fmt.Fprintf(w, "mutbench: %s: cannot keep the row: %v\n", m.Name, err)
			}
		}
	}
	fmt.Fprintln(w, Summary(out, cfg))
	return out
}

func runOne(ctx context.Context, cfg Config, m kernel.Mutant) Result {
	r := Result{Name: m.Name, Mutant: m}
	cmdline := ""
	if m.Name != Baseline {
		cmdline = m.Cmdline()
	}
	dirName := m.Name
	if m.Name == Baseline {
		dirName = "unmutated"
	}
	logf(cfg.Log, "mutbench: %s: booting with %q, seed %d, budget %v", m.Name, cmdline, cfg.Seed, cfg.Budget)
	dir := filepath.Join(cfg.Workdir, dirName)
	t, args, kid, err := cfg.Open(cmdline, dir)
	if err != nil {
		r.Err = err
		return r
	}
	defer t.Close()
	ccfg := campaign.Config{FindingPages: report.Files,
		Target: t, Seed: cfg.Seed, Duration: cfg.Budget, Programs: cfg.Programs,
		Workdir: dir, Weights: cfg.Weights, Blind: cfg.Blind, NoStates: cfg.NoStates, CoverEvery: cfg.CoverEvery, SeedCorpus: cfg.SeedCorpus,
		MinimizeRuns: cfg.MinimizeRuns, MinimizeTime: cfg.MinimizeTime,
		TargetArgs: args, Kernel: kid, Log: cfg.Log, Progress: cfg.Progress,
		ProgressLines: true, ProgressEvery: 30 * time.Second,
	}
	if m.Name != Baseline {
		// A mutant stops at its first finding; the baseline spends the
		// whole budget.
		ccfg.StopAfterFindings = 1
	}
	st, err := campaign.Run(ctx, ccfg)
	t.Close()
	if err == nil && cfg.Planted != nil {
		err = cfg.Planted(m, dir)
	}
	if st == nil {
		r.Err = err
		return r
	}
	r.Err = err
	if a := st.Judged.AtFork.String(); a != "" {
		// What the programs exercised: e.g. how many forks met page
		// moves (migration-wp) or overlapping stores.
		logf(cfg.Log, "mutbench: %s: at fork: %s", m.Name, a)
	}
	r.Findings = st.Findings
	r.Time, r.Programs = st.Elapsed, st.Programs
	if st.FirstProgram > 0 {
		r.Found, r.Time, r.Programs = true, st.FirstAt, st.FirstProgram
	}
	if f := st.First; f != nil {
		r.Oracle, r.Signature = string(f.Issue.Oracle), f.Issue.Signature
		r.OrigOps = len(f.Program.Ops)
		if f.Minimized != nil {
			r.MinOps = len(f.Minimized.Ops)
		}
		r.Reproduced, r.Replays = f.Reproduced, f.Replays
		if len(st.Saved) > 0 {
			r.Dir = st.Saved[0]
		}
	}
	return r
}

// Header is the table's first line.
func Header() string {
	return fmt.Sprintf("%-20s %-5s %8s %8s %9s %6s  %-22s %s", "MUTANT", "FOUND", "TIME", "PROGRAMS", "MIN-OPS", "REPLAY", "ORACLE", "SIGNATURE")
}

// Row is r as a table line.
func (r Result) Row() string {
	found := "no"
	if r.Found {
		found = "yes"
	}
	minOps, replay, oracle, sig := "-", "-", "-", "-"
	if r.Found && r.OrigOps > 0 {
		minOps = fmt.Sprintf("%d/%d", r.MinOps, r.OrigOps)
		replay = fmt.Sprintf("%d/%d", r.Reproduced, r.Replays)
		oracle, sig = r.Oracle, r.Signature
	}
	if r.Name == Baseline {
		found = "clean"
		if r.Findings > 0 {
			found = fmt.Sprintf("FP:%d", r.Findings)
		}
	}
	if r.Err != nil {
		sig = "error: " + strings.SplitN(r.Err.Error(), "\n", 2)[0]
		if !r.Found {
			found = "err"
		}
	}
	return fmt.Sprintf("%-20s %-5s %8s %8d %9s %6s  %-22s %s", r.Name, found, r.Time.Round(time.Second), r.Programs, minOps, replay, oracle, sig)
}

// Summary is the table's last line.
func Summary(rs []Result, cfg Config) string {
	n, found := 0, 0
	base := "not run"
	for _, r := range rs {
		if r.Name == Baseline {
			base = fmt.Sprintf("%d findings in %d programs", r.Findings, r.Programs)
			if r.Err != nil {
				base += " (error)"
			}
			continue
		}
		n++
		if r.Found {
			found++
		}
	}
	how := "coverage-guided, KCOV on every program"
	switch {
	case cfg.Blind:
		how = "blind"
	case cfg.NoStates:
		how = "guided by edges only (no memory states)"
	case cfg.CoverEvery != 1:
		how = "coverage-guided, " + (&campaign.Config{CoverEvery: cfg.CoverEvery}).CoverRule()
	}
	if cfg.SeedCorpus != "" {
		how += ", every row from the corpus in " + cfg.SeedCorpus
	}
	return fmt.Sprintf("found %d of %d mutants (seed %d, budget %v per mutant, %s); unmutated build: %s", found, n, cfg.Seed, cfg.Budget, how, base)
}

// Clean reports whether every mutant was found and the baseline (if run)
// had no finding, and no row failed to run.
func Clean(rs []Result) bool {
	for _, r := range rs {
		if r.Err != nil || (r.Name == Baseline) == r.Found {
			return false
		}
	}
	return true
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
