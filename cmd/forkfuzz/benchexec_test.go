package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// bench exec runs a fixed set of programs under each configuration and
// prints programs/s side by side with the ratio to everything on.
func TestBenchExec(t *testing.T) {
	code, out, errs := forkfuzz(t, "bench", "exec", "--target", "sim", "--programs", "3", "--rounds", "1")
	if code != exitClean {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if !regexp.MustCompile(`(?m)^all on +3 `).MatchString(out) {
		t.Errorf("output lacks the all-on row with 3 runs:\n%s", out)
	}
	for _, want := range []string{"3 programs (seed 1, profile default) x 1 rounds", "1.00x", "no kcov", "no census", "neither", "1 word/view"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// orderTarget records the options of every run.
type orderTarget struct{ runs []agents.Options }

func (o *orderTarget) Name() string { return "order" }
func (o *orderTarget) Close() error { return nil }
func (o *orderTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	o.runs = append(o.runs, opt)
	return &obs.Observation{}, nil
}

// TestBenchExecOrder: every program first runs once unmeasured, then no
// configuration always goes first: over as many programs as there are
// configurations, each goes first once per round.
func TestBenchExecOrder(t *testing.T) {
	n := len(execCosts)
	progs := make([]*prog.Program, n)
	for i := range progs {
		progs[i] = &prog.Program{Regions: []prog.Region{{Kind: prog.AnonPrivate, Pages: 1}}}
	}
	tg := &orderTarget{}
	rows := benchExec(tg, progs, execCosts, 2, nil)
	if len(tg.runs) != n+2*n*n {
		t.Fatalf("%d runs, want %d warm-ups and %d measured", len(tg.runs), n, 2*n*n)
	}
	for _, r := range rows {
		if r.runs != 2*n {
			t.Errorf("%s: %d measured runs, want %d", r.name, r.runs, 2*n)
		}
	}
	first := map[agents.Options]int{}
	for r := 0; r < 2; r++ {
		for i := 0; i < n; i++ {
			first[tg.runs[n+(r*n+i)*n]]++
		}
	}
	for _, c := range execCosts {
		var opt agents.Options
		c.set(&opt)
		if first[opt] != 2 {
			t.Errorf("%s went first %d times in 2 rounds of %d programs, want 2", c.name, first[opt], n)
		}
	}
}

func TestSelectExecCosts(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr string
	}{
		{"", nil, ""}, // all
		{"no kcov, all on", []string{"all on", "no kcov"}, ""},
		{"heap THP", []string{"heap THP"}, ""},
		{"all on,bogus", nil, `unknown configuration "bogus"`},
	}
	for _, tt := range tests {
		got, err := selectExecCosts(tt.list)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.list, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.list, err)
		}
		if tt.want == nil {
			if len(got) != len(execCosts) {
				t.Errorf("%q: %d configurations, want all %d", tt.list, len(got), len(execCosts))
			}
			continue
		}
		var names []string
		for _, c := range got {
			names = append(names, c.name)
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("%q: %v, want %v", tt.list, names, tt.want)
		}
	}
}

// coverTarget returns edges {i, i+1} for program i, none without KCOV,
// and a filled buffer when children keep their small buffers.
type coverTarget struct{ orderTarget }

func (c *coverTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	if opt.NoCover {
		return &obs.Observation{Cover: &obs.Coverage{Unavailable: "off"}}, nil
	}
	i := uint32(p.Regions[0].Pages)
	return &obs.Observation{Cover: &obs.Coverage{Edges: []uint32{i, i + 1}, Overflow: opt.ChildKcovGrow == "none"}}, nil
}

// bench exec counts each configuration's coverage: a configuration that
// collects less than another says so beside its speed.
func TestBenchExecCoverage(t *testing.T) {
	var progs []*prog.Program
	for i := 1; i <= 3; i++ {
		progs = append(progs, &prog.Program{Regions: []prog.Region{{Kind: prog.AnonPrivate, Pages: i}}})
	}
	costs, err := selectExecCosts("all on,no kcov,child grow none")
	if err != nil {
		t.Fatal(err)
	}
	rows := benchExec(&coverTarget{}, progs, costs, 2, nil)
	var b strings.Builder
	printExecRows(&b, rows)
	out := b.String()
	for _, want := range []string{
		"all on            2 per program (mean of 6 runs), 4 over all its runs, 0 runs filled a buffer or set",
		"child grow none   2 per program (mean of 6 runs), 4 over all its runs, 6 runs filled a buffer or set",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)^no kcov .*per program \(mean`).MatchString(out) {
		t.Errorf("a configuration without coverage has a coverage line:\n%s", out)
	}
}
