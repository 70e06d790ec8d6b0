package cow

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/testutil"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// mutantRow is what cow.c and forkfuzz's cow programs did on one mutant.
type mutantRow struct {
	m        kernel.Mutant
	cowFail  []string // cow.c cases that failed
	cowCrash string   // why cow.c's VM did not finish ("" if it did)
	ran      int      // forkfuzz programs run (all but those after maxFailed failures)
	ffFail   []string // cases whose forkfuzz program failed
	missed   []string // cow.c failed, forkfuzz's program passed
	noProg   []string // cow.c failed, forkfuzz has no program
	first    string   // the signatures of forkfuzz's first failing program
	took     time.Duration
}

// TestQEMUCowMutants runs the real cow.c and forkfuzz's cow.c programs on
// the mutation benchmark's kernel, one mutant at a time (its boot
// parameter in both VMs), and requires forkfuzz's program to fail on
// every case where cow.c fails (forkfuzz runs those and the other cases
// until five of its programs failed). It takes one to two minutes a mutant
// under TCG, so it runs only when asked: FORKFUZZ_COW_MUTANTS=all (or a
// comma-separated list of names or numbers), with the image from
// FORKFUZZ_MUTANTS_KERNEL or the cache of `forkfuzz kernel build
// --mutants`. With FORKFUZZ_COW_DOC=1 it rewrites docs/cow.md's
// mutants section.
func TestQEMUCowMutants(t *testing.T) {
	sel := os.Getenv("FORKFUZZ_COW_MUTANTS")
	if sel == "" {
		t.Skip("one to two minutes a mutant: set FORKFUZZ_COW_MUTANTS=all (or names/numbers) to run it")
	}
	needQEMU(t)
	image := os.Getenv("FORKFUZZ_MUTANTS_KERNEL")
	if image == "" {
		var ok bool
		if image, ok = kernel.CachedMutantsImage(); !ok {
			t.Skip("no mutants kernel: run `forkfuzz kernel build --mutants` or set FORKFUZZ_MUTANTS_KERNEL")
		}
	}
	var mutants []kernel.Mutant
	if sel == "all" {
		mutants = kernel.Mutants
	} else {
		for _, s := range strings.Split(sel, ",") {
			m, err := kernel.MutantByName(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("FORKFUZZ_COW_MUTANTS: %v", err)
			}
			mutants = append(mutants, m)
		}
	}
	bin := buildCow(t)
	var rows []mutantRow
	// cow.c's VM runs first, under TCG until the agent's VM has said
	// whether KVM boots the image.
	release, accel := "", "tcg"
	for _, m := range mutants {
		row := mutantRow{m: m}
		start := time.Now()
		param := kernel.MutantsParam + "=" + strconv.Itoa(m.Num)
		// cow.c takes 20 s on the reference kernel under TCG; an oops
		// ends the VM (cow.c's later cases then do not run) instead of
		// leaving it hung on the process that died in the kernel.
		console, err := runCowVM(t, image, accel, bin, param+" oops=panic", 3*time.Minute)
		if err != nil {
			row.cowCrash = crashLine(console, err)
			t.Logf("mutant %d %s: %v", m.Num, m.Name, err)
		}
		got := parseKTAP(console)
		// Every case cow.c failed, the others until maxFailed programs
		// failed: a mutant that hangs programs (swap-dup-skipped) costs
		// a program timeout each. A cow.c program takes seconds.
		const maxFailed = 5
		var ff map[string]ffResult
		ff, release, accel = runPrograms(t, image, param, 30*time.Second, func(c *Case, failed int) bool {
			return got[c.Run].status == "fail" || failed < maxFailed
		})
		row.ran = len(ff)
		for _, c := range Cases() {
			f, has := ff[c.Run]
			if has && !f.ok {
				row.ffFail = append(row.ffFail, c.Run)
				if row.first == "" {
					row.first = f.sigs
				}
			}
			if got[c.Run].status != "fail" {
				continue
			}
			row.cowFail = append(row.cowFail, c.Run)
			switch {
			case !has:
				row.noProg = append(row.noProg, c.Run)
			case f.ok:
				row.missed = append(row.missed, c.Run)
				t.Errorf("mutant %d %s: cow.c fails %q (%s), forkfuzz's %s passes", m.Num, m.Name, c.Run, got[c.Run].msg, c.File)
			}
		}
		if row.cowCrash != "" && len(row.ffFail) == 0 {
			t.Errorf("mutant %d %s: cow.c's VM did not finish (%s), every forkfuzz program passed", m.Num, m.Name, row.cowCrash)
		}
		row.took = time.Since(start)
		t.Logf("mutant %d %s: cow.c %d failed%s; forkfuzz %d of %d failed (%s); missed %d, no program %d; %v",
			m.Num, m.Name, len(row.cowFail), crashNote(row.cowCrash), len(row.ffFail), row.ran, row.first, len(row.missed), len(row.noProg), row.took.Round(time.Second))
		rows = append(rows, row)
	}
	table := mutantTable(rows)
	t.Logf("cow.c and forkfuzz on the mutants (%s, %s):\n%s", release, accel, table)
	if os.Getenv("FORKFUZZ_COW_DOC") == "1" && sel == "all" {
		path := filepath.Join(testutil.RepoRoot(t), "docs/cow.md")
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		head := fmt.Sprintf("Written by `FORKFUZZ_COW_MUTANTS=all FORKFUZZ_COW_DOC=1 go test -run TestQEMUCowMutants -v -timeout 2h ./corpus/cow` "+
			"on the mutants image (%s, %s, 2 vCPUs, 1 GiB), one mutant at a time in both VMs.\n\n", release, accel)
		doc, err = ReplaceSection(doc, "mutants", head+table)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mutantTable is the markdown table of rows.
func mutantTable(rows []mutantRow) string {
	var sb strings.Builder
	sb.WriteString("| mutant | cow.c failed | forkfuzz failed (of run) | cow.c fails, forkfuzz passes | forkfuzz's first failing program's signatures | time |\n")
	sb.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rows {
		cow := strconv.Itoa(len(r.cowFail))
		if r.cowCrash != "" {
			cow += " (VM: " + r.cowCrash + ")"
		}
		if len(r.noProg) > 0 {
			cow += fmt.Sprintf(" (%d without a program)", len(r.noProg))
		}
		missed := "-"
		if len(r.missed) > 0 {
			missed = strings.Join(r.missed, "; ")
		}
		first := strings.ReplaceAll(r.first, "|", "\\|")
		if len(first) > 120 {
			first = first[:120] + "..."
		}
		fmt.Fprintf(&sb, "| %d %s | %s | %d (%d) | %s | %s | %v |\n", r.m.Num, r.m.Name, cow, len(r.ffFail), r.ran, missed, first, r.took.Round(time.Second))
	}
	return sb.String()
}

// crashLine picks the console line that says why a VM stopped: a kernel
// BUG, oops or panic, else the error's first line and the console's
// last cow.c case.
func crashLine(console string, err error) string {
	lines := strings.Split(strings.TrimSpace(console), "\n")
	for _, l := range lines {
		for _, k := range []string{"BUG:", "kernel BUG", "Oops", "Kernel panic", "WARNING:"} {
			if strings.Contains(l, k) {
				return strings.TrimSpace(l)
			}
		}
	}
	last := ""
	for _, l := range lines {
		if m := runRE.FindStringSubmatch(l); m != nil {
			last = m[1]
		}
	}
	return fmt.Sprintf("%s, in %q", firstLine(err.Error()), last)
}

func crashNote(s string) string {
	if s == "" {
		return ""
	}
	return ", VM did not finish: " + s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
