package mutbench

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// Spread over kept results: per mutant and mode the runs that found it,
// the median and range of programs and time (a run that did not find it
// is a bound, ">"), rows that could not run counted apart and replaced by
// a later run of the same row, totals over the seeds that ran every
// mutant, and the comparison of the modes.
func TestSpread(t *testing.T) {
	recs, err := LoadRecords([]string{"testdata"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 13 {
		t.Fatalf("%d records, want 13 (a blank line is skipped)", len(recs))
	}
	got := Spread(recs)
	golden := filepath.Join("testdata", "spread.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Spread:\n%s\nwant (testdata/spread.golden; -update rewrites it):\n%s", got, want)
	}
	// The points the golden file must show, named, so that a rewrite
	// that loses one fails here.
	for _, line := range []string{
		"wp-src-memfd          guided  2/3         17 (12-17, >110)           56s (40s-56s, >5m0s)",
		"dontfork-ignored      guided  3/3         16 (5-20)",
		"                      blind   2/2 (1 err) 14 (14-25)                 1m25s (1m25s-1m40s)",
		"total guided  over 3 seeds that ran all 2 mutants: found 5 of 6; per seed, programs 33 (32-33, >115)",
		"total blind   over 2 seeds that ran all 2 mutants: found 4 of 4",
		"median programs: guided fewer on 0 mutants, blind on 2, 0 tied",
		"unmutated build, blind: 0 findings in 1 runs (120 programs)",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("Spread lacks %q", line)
		}
	}
}

// A mutant that only the second mode ran is still named on its line.
func TestSpreadNamesEveryMutant(t *testing.T) {
	got := Spread([]Record{
		{Seed: 1, Mode: Guided, Mutant: "wp-src-memfd", Found: true, Programs: 3, Seconds: 9},
		{Seed: 1, Mode: Blind, Mutant: "wp-src-memfd", Found: true, Programs: 2, Seconds: 8},
		{Seed: 1, Mode: Blind, Mutant: "file-private-writable", Found: true, Programs: 9, Seconds: 40},
	})
	for _, line := range []string{
		"wp-src-memfd          guided  1/1         3 ",
		"                      blind   1/1         2 ",
		"file-private-writable blind   1/1         9                          40s",
		"total guided  no seed ran all 2 mutants",
		"total blind   over 1 seeds that ran all 2 mutants: found 2 of 2; per seed, programs 11, time 48s",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("Spread lacks %q:\n%s", line, got)
		}
	}
}

// A results file with a bad line is an error naming the file, the line
// and the field; nothing is half read.
func TestReadRecordsBadInput(t *testing.T) {
	good := `{"seed":1,"mode":"guided","mutant":"wp-src-pmd","found":true,"seconds":3,"programs":2,"budget_s":60}`
	for _, c := range []struct{ line, want string }{
		{`{"seed":0,"mode":"guided","mutant":"wp-src-pmd"}`, `r.jsonl:2: field "seed": missing or 0`},
		{`{"seed":1,"mode":"fast","mutant":"wp-src-pmd"}`, `r.jsonl:2: field "mode": "fast"`},
		{`{"seed":1,"mode":"blind","mutant":"3"}`, `r.jsonl:2: field "mutant": "3" is no mutant`},
		{`{"seed":1,"mode":"blind","mutant":"wp-src-pmd","seconds":-1}`, `r.jsonl:2: field "seconds"`},
		{`{"seed":1,"mode":"blind","mutant":"wp-src-pmd","programs":"many"}`, `r.jsonl:2: field "programs": want a int64, got string`},
		{`{"seed":1,"mode":"blind","mutant":"wp-src-pmd","colour":"red"}`, `r.jsonl:2: json: unknown field "colour"`},
		{`{"seed":1,`, `r.jsonl:2: unexpected EOF`},
	} {
		recs, err := ReadRecords(strings.NewReader(good+"\n"+c.line+"\n"), "r.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) || recs != nil {
			t.Errorf("%s: %v (%d records), want an error with %q", c.line, err, len(recs), c.want)
		}
	}
}

// Every record ReadRecords accepts survives a write and a read back.
func FuzzReadRecords(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "results.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"seed":1,"mode":"edges","mutant":"(unmutated)"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := ReadRecords(bytes.NewReader(in), "in")
		if err != nil {
			return
		}
		var out bytes.Buffer
		for _, r := range recs {
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out.Write(append(line, '\n'))
		}
		back, err := ReadRecords(&out, "out")
		if err != nil || !reflect.DeepEqual(back, recs) && len(recs) > 0 {
			t.Fatalf("read back: %v\n%+v\nwant %+v", err, back, recs)
		}
		Spread(recs) // must not panic
	})
}

// A range over runs that found a mutant and runs that did not shows the
// finds' range and the largest bound: seeds 1-5 of the blind table once
// read "13m46s (8m2s->16m41s)", hiding seed 2's 20m38s behind seed 5's
// bound.
func TestStatRangeWithMisses(t *testing.T) {
	secs := func(found bool, s float64) outcome { return outcome{found: found, seconds: s} }
	for _, c := range []struct {
		outs []outcome
		want string
	}{
		{[]outcome{secs(true, 610), secs(true, 1238), secs(true, 482), secs(false, 1001), secs(true, 826)}, "13m46s (8m2s-20m38s, >16m41s)"},
		{[]outcome{secs(true, 40), secs(false, 300)}, "40s (40s, >5m0s)"},
		{[]outcome{secs(false, 300), secs(false, 310)}, ">5m0s (>5m0s->5m10s)"},
		{[]outcome{secs(true, 40), secs(true, 56)}, "40s (40s-56s)"},
		{[]outcome{secs(false, 300)}, ">5m0s"},
	} {
		if got := stat(c.outs, bySeconds, showSeconds); got != c.want {
			t.Errorf("stat(%v) = %q, want %q", c.outs, got, c.want)
		}
	}
}

// Every mode sets a Config that ModeOf names back: guided and edges
// collect on every program (as every earlier record of them did), sampled
// on one fresh program in 4, blind takes its campaign's default.
func TestSetModeRoundTrip(t *testing.T) {
	for _, mode := range Modes {
		cfg := Config{CoverEvery: 9}
		if err := SetMode(&cfg, mode); err != nil {
			t.Fatal(err)
		}
		if got := ModeOf(cfg); got != mode {
			t.Errorf("SetMode(%q) then ModeOf: %q", mode, got)
		}
		if want := map[string]int{Guided: 1, Edges: 1, Blind: 0, Sampled: SampledCoverEvery}[mode]; cfg.CoverEvery != want {
			t.Errorf("mode %q: CoverEvery %d, want %d", mode, cfg.CoverEvery, want)
		}
	}
	// A guided run with no mode asked for is the campaign's default.
	if got := ModeOf(Config{}); got != Sampled {
		t.Errorf("ModeOf(Config{}) = %q, want %q (a guided campaign's default)", got, Sampled)
	}
}
