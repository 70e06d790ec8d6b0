package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// NewProgramParent draws exactly what NewProgram draws.
func TestNewProgramParentIsNewProgram(t *testing.T) {
	w := gen.DefaultWeights()
	pool := NewPool().Progs
	mutated := 0
	for i := int64(0); i < 60; i++ {
		p, parent := NewProgramParent(3, i, pool, w)
		if string(p.Format()) != string(NewProgram(3, i, pool, w).Format()) {
			t.Fatalf("program %d differs", i)
		}
		if parent != nil {
			mutated++
		}
	}
	if mutated == 0 {
		t.Fatal("no program of 60 was a mutation")
	}
}

// A campaign stopped midway and started again on the same workdir
// continues from its saved corpus: the second run restores every program
// the first one kept and mutates some of them (it logs which).
func TestRunResumesCorpus(t *testing.T) {
	wd := t.TempDir()
	dir := filepath.Join(wd, "corpus", CorpusScope("model", ""))
	ctx, stop := context.WithCancel(context.Background())
	var log1 bytes.Buffer
	go func() {
		// Stop the first run once it kept some programs.
		for {
			if names, _ := filepath.Glob(filepath.Join(dir, "*.ffz")); len(names) >= 40 {
				stop()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	st1, err := Run(ctx, Config{Target: &modelTarget{}, Seed: 11, Weights: gen.DefaultWeights(), Workdir: wd, Corpus: dir, Log: &log1})
	if err != nil {
		t.Fatal(err)
	}
	if st1.Programs < 40 {
		t.Fatalf("first run: %d programs before it was stopped", st1.Programs)
	}
	d, _ := corpus.Open(dir)
	names, _ := d.Names()
	first := map[string]bool{}
	for _, n := range names {
		first[strings.TrimSuffix(n, corpus.Ext)] = true
	}
	t.Logf("first run: %d programs, stopped; %d kept in %s", st1.Programs, len(first), dir)

	// What the first run kept among findings, before the second run
	// adds its own there.
	fd, _ := corpus.Open(filepath.Join(dir, CorpusFindings))
	fnames, _ := fd.Names()
	var log2 bytes.Buffer
	st2, err := Run(context.Background(), Config{Target: &modelTarget{}, Seed: 12, Programs: 60, Weights: gen.DefaultWeights(), Workdir: wd, Corpus: dir, Log: &log2})
	if err != nil {
		t.Fatal(err)
	}
	out := log2.String()
	for _, n := range fnames {
		first[strings.TrimSuffix(n, corpus.Ext)] = true
	}
	if want := "restored " + itoa(len(names)+len(fnames)) + " programs"; !strings.Contains(out, want) {
		t.Fatalf("second run does not say %q:\n%s", want, out)
	}
	ms := regexp.MustCompile(`program (\d+): mutated from restored corpus program ([0-9a-f]+)`).FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		t.Fatalf("the second run mutated no program of the first:\n%s", out)
	}
	for _, m := range ms {
		if !first[m[2]] {
			t.Errorf("program %s mutated %s, which the first run did not keep", m[1], m[2])
		}
	}
	t.Logf("second run: %d programs, %d logged mutations of the first run's programs, e.g. %q", st2.Programs, len(ms), ms[0][0])
	// Both runs appended stats samples to the workdir.
	samples, err := ReadSamples(wd)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int64{}
	for _, s := range samples {
		runs[s.Run] = s.Programs
	}
	if len(runs) != 2 {
		b, _ := json.Marshal(samples)
		t.Fatalf("stats samples of %d runs, want 2: %s", len(runs), b)
	}
	if _, err := os.Stat(filepath.Join(wd, StatsFile)); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
