package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/bench/mutbench"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// Bad input to bench mutants is exit 2 with one line naming what is wrong,
// before anything boots.
func TestBenchMutantsBadInput(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "bzImage")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "mutants", "--kernel", img, "--mutants", "no-such-bug"}, `--mutants: unknown mutant "no-such-bug" (want a number 1-`},
		{[]string{"bench", "mutants", "--kernel", img, "--mutants", "wp-src-pmd,99"}, `unknown mutant "99"`},
		{[]string{"bench", "mutants", "--kernel", img, "--budget", "0s"}, "--budget 0s"},
		{[]string{"bench", "mutants", "--target", "native"}, "--target native: the mutants live in a kernel"},
		{[]string{"bench", "mutants", "--target", "sim", "--mutants", "1"}, "--target sim: the mutants live in a kernel"},
		{[]string{"bench", "mutants"}, "want --kernel IMAGE"},
		{[]string{"bench", "mutants", "--kernel", img, "--mutants", "none", "--no-baseline"}, "nothing to run"},
		{[]string{"bench", "mutants", "extra"}, `unexpected argument "extra"`},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "0"}, `--seeds "0": "0": want a seed of 1 or more`},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "1,5-2"}, `--seeds "1,5-2": "5-2": want a range LOW-HIGH`},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "1-3,2"}, `seed 2 twice`},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "1-3", "--seed", "2"}, "--seed and --seeds: give one"},
		{[]string{"bench", "mutants", "--kernel", img, "--modes", "blind"}, "--modes needs --seeds"},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "1", "--modes", "guided,fast"}, `--modes: unknown mode "fast"`},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "1", "--modes", "blind,blind"}, `--modes: blind twice`},
		{[]string{"bench", "mutants", "--kernel", img, "--seeds", "1", "--modes", "blind", "--blind"}, "--modes with --blind or --no-states"},
		{[]string{"bench", "mutants", "--table", filepath.Join(dir, "none.jsonl")}, "--table: open " + filepath.Join(dir, "none.jsonl")},
	} {
		code, out, errs := forkfuzz(t, c.args...)
		lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
		if code != exitError || !strings.Contains(errs, c.want) || len(lines) != 1 {
			t.Errorf("forkfuzz %s: exit %d, want 2 and one line with %q\nstderr: %s\nstdout: %s",
				strings.Join(c.args, " "), code, c.want, errs, out)
		}
		if strings.Contains(out+errs, "booting") {
			t.Errorf("forkfuzz %s: announced a boot", strings.Join(c.args, " "))
		}
	}
}

// --table prints the spread of kept results, merged over files and
// workdirs, without a kernel; a bad line is exit 2 naming file and line.
func TestBenchMutantsTable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "bench", "mutbench", "testdata", "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(src), "\n")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	os.WriteFile(filepath.Join(work, mutbench.ResultsFile), []byte(strings.Join(lines[:7], "")), 0o644)
	more := filepath.Join(dir, "more.jsonl")
	os.WriteFile(more, []byte(strings.Join(lines[7:], "")), 0o644)
	code, out, errs := forkfuzz(t, "bench", "mutants", "--table", work, "--table", more)
	if code != exitClean {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "bench", "mutbench", "testdata", "spread.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("--table of the two halves:\n%s\nwant bench/mutbench/testdata/spread.golden:\n%s", out, want)
	}
	os.WriteFile(more, []byte(lines[7]+`{"seed":2,"mode":"blind","mutant":"wp-src-pmd","programs":-3}`+"\n"), 0o644)
	code, _, errs = forkfuzz(t, "bench", "mutants", "--table", work, "--table", more)
	if code != exitError || !strings.Contains(errs, more+`:2: field "programs": -3 is negative`) {
		t.Errorf("bad line: exit %d, stderr %q", code, errs)
	}
}

// --list prints every mutant with its file and oracle.
func TestBenchMutantsList(t *testing.T) {
	code, out, errs := forkfuzz(t, "bench", "mutants", "--list")
	if code != exitClean {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(kernel.Mutants) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(kernel.Mutants), out)
	}
	for i, m := range kernel.Mutants {
		if f := strings.Fields(lines[i]); len(f) < 3 || f[1] != m.Name || f[2] != m.File {
			t.Errorf("line %q: want %d %s %s", lines[i], m.Num, m.Name, m.File)
		}
	}
}

// planted reads the row's consoles: a mutant row needs the kernel's
// "planted" line, the baseline must have none.
func TestBenchMutantsPlanted(t *testing.T) {
	dir := t.TempDir()
	m := kernel.Mutants[2]
	if err := planted(m, dir); err == nil || !strings.Contains(err.Error(), "no VM console") {
		t.Errorf("no console: %v", err)
	}
	con := filepath.Join(dir, "vm", "vm-0", "console.log")
	os.MkdirAll(filepath.Dir(con), 0o755)
	os.WriteFile(con, []byte("[    0.000000] Linux version 6.1.192\n"), 0o644)
	if err := planted(m, dir); err == nil || !strings.Contains(err.Error(), "kernel build --mutants") {
		t.Errorf("stock kernel: %v", err)
	}
	if err := planted(kernel.Mutant{Name: mutbench.Baseline}, dir); err != nil {
		t.Errorf("baseline on a clean console: %v", err)
	}
	os.WriteFile(con, []byte("[    0.000000] Linux version 6.1.192\n[    0.000000] forkfuzz: mutant 3 (wp-src-pmd) planted\n"), 0o644)
	if err := planted(m, dir); err != nil {
		t.Errorf("planted: %v", err)
	}
	// The KVM probe's console, when KVM could not boot the image, has
	// no kernel in it: it is not read (it failed every row before).
	probe := filepath.Join(dir, "vm", "vm--1", "console.log")
	os.MkdirAll(filepath.Dir(probe), 0o755)
	os.WriteFile(probe, []byte("=== forkfuzz: boot 1 of vm -1 ===\n"), 0o644)
	if err := planted(m, dir); err != nil {
		t.Errorf("planted, with an empty probe console beside it: %v", err)
	}
	os.Remove(con)
	if err := planted(m, dir); err == nil || !strings.Contains(err.Error(), "shows a kernel booting") {
		t.Errorf("only the probe's console: %v", err)
	}
	os.WriteFile(con, []byte("[    0.000000] Linux version 6.1.192\n[    0.000000] forkfuzz: mutant 3 (wp-src-pmd) planted\n"), 0o644)
	if err := planted(kernel.Mutants[3], dir); err == nil {
		t.Error("another mutant's line accepted")
	}
	if err := planted(kernel.Mutant{Name: mutbench.Baseline}, dir); err == nil {
		t.Error("baseline with a mutant planted accepted")
	}
}

// --reach needs no kernel: one line per mutant with a percentage.
func TestBenchMutantsReach(t *testing.T) {
	code, out, errs := forkfuzz(t, "bench", "mutants", "--reach", "50")
	if code != exitClean {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(kernel.Mutants) || !strings.Contains(lines[0], "first 50 programs (seed 1, profile default") {
		t.Fatalf("output:\n%s", out)
	}
	for i, m := range kernel.Mutants {
		if f := strings.Fields(lines[1+i]); len(f) < 2 || f[0] != m.Name || !strings.HasSuffix(f[1], "%") {
			t.Errorf("line %q for %s", lines[1+i], m.Name)
		}
	}
	if code, _, _ := forkfuzz(t, "bench", "mutants", "--reach", "-1"); code != exitError {
		t.Errorf("--reach -1: exit %d, want 2", code)
	}
}
