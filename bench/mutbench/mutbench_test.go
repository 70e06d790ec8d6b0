package mutbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// simOpener stands the simulated kernel in for QEMU: the mutant's
// cmdline word switches on a sim mutant with the same kind of bug, the
// baseline boots the clean model. It records the command lines asked for.
func simOpener(t *testing.T, asked *[]string, simMutant map[string]string) Opener {
	return func(cmdline, dir string) (agents.Target, []string, campaign.KernelID, error) {
		*asked = append(*asked, cmdline)
		name := ""
		if cmdline != "" {
			name = simMutant[strings.TrimPrefix(cmdline, kernel.MutantsParam+"=")]
			if name == "" {
				return nil, nil, campaign.KernelID{}, errors.New("no sim stand-in for " + cmdline)
			}
		}
		tg, err := sim.NewTarget(sim.Config{Mode: sim.Eager, Mutant: name, SchedSeed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tg, []string{"--target", "sim", "--mutant", name}, campaign.KernelID{Simulated: tg.Name()}, nil
	}
}

var rowRe = regexp.MustCompile(`^(\S+)\s+(yes|no|err|clean|FP:\d+)\s+\S+\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$`)

// The table has a header, one row per mutant (found, time, programs,
// minimized size, replay rate, oracle) plus the baseline, and a summary;
// a row that cannot boot says so in its row and does not stop the rest.
func TestRunTable(t *testing.T) {
	var asked []string
	ms := []kernel.Mutant{kernel.Mutants[6], kernel.Mutants[5], kernel.Mutants[0]} // wipeonfork-copied, dontfork-ignored, wp-src-memfd
	open := simOpener(t, &asked, map[string]string{
		"wipeonfork-copied": "eager-wipeonfork-ignored",
		"dontfork-ignored":  "eager-dontfork-ignored",
		// wp-src-memfd has no stand-in: its row is an error row.
	})
	var buf bytes.Buffer
	rs := Run(context.Background(), Config{
		Mutants: ms, Baseline: true, Open: open, Seed: 1, Budget: 20 * time.Second, Programs: 300,
		Weights: gen.DefaultWeights(), Workdir: t.TempDir(), MinimizeRuns: 50,
	}, &buf)
	t.Log("\n" + buf.String())
	want := []string{"forkfuzz_mutant=wipeonfork-copied", "forkfuzz_mutant=dontfork-ignored", "forkfuzz_mutant=wp-src-memfd", ""}
	if strings.Join(asked, "|") != strings.Join(want, "|") {
		t.Errorf("booted with %q, want %q", asked, want)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2+len(want) {
		t.Fatalf("%d lines, want header, %d rows, summary", len(lines), len(want))
	}
	for _, col := range []string{"MUTANT", "FOUND", "TIME", "PROGRAMS", "MIN-OPS", "REPLAY", "ORACLE"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %s", lines[0], col)
		}
	}
	for i, name := range []string{"wipeonfork-copied", "dontfork-ignored"} {
		m := rowRe.FindStringSubmatch(lines[1+i])
		if m == nil || m[1] != name || m[2] != "yes" {
			t.Fatalf("row %q: want %s found", lines[1+i], name)
		}
		r := rs[i]
		if !r.Found || r.Programs < 1 || r.MinOps < 1 || r.MinOps > r.OrigOps || r.Replays != 5 || r.Reproduced < 1 || r.Dir == "" {
			t.Errorf("%s: %+v", name, r)
		}
		if m[4] != strings.TrimSpace(strings.Split(m[4], "/")[0])+"/"+strings.Split(m[4], "/")[1] || !strings.Contains(m[5], "/5") {
			t.Errorf("row %q: min-ops %q replay %q", lines[1+i], m[4], m[5])
		}
	}
	if !strings.HasPrefix(rs[0].Signature, "snapshot:wipeonfork") || rs[0].Oracle != "snapshot" {
		t.Errorf("wipeonfork-copied stand-in: oracle %s signature %s", rs[0].Oracle, rs[0].Signature)
	}
	if rs[2].Err == nil || !strings.Contains(lines[3], "error: no sim stand-in") || !strings.Contains(lines[3], " err ") {
		t.Errorf("the row that could not boot: %q, err %v", lines[3], rs[2].Err)
	}
	base := rs[3]
	if base.Name != Baseline || base.Found || base.Findings != 0 || base.Programs != 300 || !strings.Contains(lines[4], "clean") {
		t.Errorf("baseline %+v, row %q: want clean over the whole budget (300 programs)", base, lines[4])
	}
	if !strings.HasPrefix(lines[5], "found 2 of 3 mutants (seed 1,") || !strings.Contains(lines[5], "unmutated build: 0 findings in 300 programs") {
		t.Errorf("summary %q", lines[5])
	}
	if Clean(rs) {
		t.Error("Clean with an error row")
	}
	if !Clean(rs[:2]) || !Clean([]Result{rs[0], base}) {
		t.Error("not Clean with every mutant found and a clean baseline")
	}
}

// RunMany runs every seed in every mode, each run in its own directory,
// and keeps every row in results.jsonl; run again on the same workdir it
// runs only the rows that have no result (here the one that could not
// boot), and its spread covers them all.
func TestRunMany(t *testing.T) {
	var asked []string
	open := simOpener(t, &asked, map[string]string{"dontfork-ignored": "eager-dontfork-ignored"})
	dir := t.TempDir()
	cfg := Config{
		Mutants: []kernel.Mutant{kernel.Mutants[5], kernel.Mutants[0]}, // dontfork-ignored, wp-src-memfd (no stand-in)
		Open:    open, Budget: 20 * time.Second, Programs: 100,
		Weights: gen.DefaultWeights(), Workdir: dir, MinimizeRuns: 5,
	}
	var buf bytes.Buffer
	recs, err := RunMany(context.Background(), cfg, []uint64{1, 2}, []string{Guided, Blind}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + buf.String())
	if len(asked) != 8 || len(recs) != 8 {
		t.Fatalf("%d boots, %d records, want 8 each (2 seeds x 2 modes x 2 mutants)", len(asked), len(recs))
	}
	for _, sub := range []string{"seed-1-guided", "seed-1-blind", "seed-2-guided", "seed-2-blind"} {
		if _, err := os.Stat(filepath.Join(dir, sub, "dontfork-ignored")); err != nil {
			t.Errorf("run directory: %v", err)
		}
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[fmt.Sprintf("%d/%s/%s", r.Seed, r.Mode, r.Mutant)] = true
		switch r.Mutant {
		case "dontfork-ignored":
			if !r.Found || r.Err != "" || r.Programs < 1 || r.BudgetS != 20 {
				t.Errorf("%+v: want found within the budget", r)
			}
		case "wp-src-memfd":
			if r.Err == "" {
				t.Errorf("%+v: want the boot error kept", r)
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("rows %v: want every seed, mode and mutant once", seen)
	}
	if !strings.Contains(buf.String(), "dontfork-ignored      guided  2/2") || !strings.Contains(buf.String(), "0/0 (2 err)") {
		t.Errorf("spread lacks the rows:\n%s", buf.String())
	}
	// Again: only the rows that could not run are run again.
	asked, buf = nil, bytes.Buffer{}
	recs, err = RunMany(context.Background(), cfg, []uint64{1, 2}, []string{Guided, Blind}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("forkfuzz_mutant=wp-src-memfd|", 4); strings.Join(asked, "|")+"|" != want {
		t.Errorf("second run booted %q, want only wp-src-memfd's four rows", asked)
	}
	if !strings.Contains(buf.String(), "seed 1, guided: 1 rows already in") || len(recs) != 8 || AllClean(recs) {
		t.Errorf("second run: %d records, AllClean %v:\n%s", len(recs), AllClean(recs), buf.String())
	}
	if _, err := RunMany(context.Background(), cfg, []uint64{1}, []string{"fast"}, &buf); err == nil {
		t.Error("RunMany with an unknown mode: no error")
	}
}
