package campaign

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// leakProg loses isolation on a kernel whose fork leaves the parent's
// pages writable: the child's view after the parent's store shows it.
const leakProg = `forkfuzz v1
region r0 anon-private pages=4 thp=off
store r0 off=0x0 count=8 stride=0x8
fork f0
store r0 off=0x0 count=8 stride=0x8
f0: check
wait f0
`

// seqTarget runs its i-th run on targets[min(i, len-1)] and remembers
// each run's options.
type seqTarget struct {
	targets []agents.Target
	opts    []agents.Options
}

func (s *seqTarget) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	t := s.targets[min(len(s.opts), len(s.targets)-1)]
	s.opts = append(s.opts, opt)
	return t.Run(p, opt)
}

func (s *seqTarget) Close() error { return nil }

func (s *seqTarget) Name() string { return "seq" }

func TestRunJudgedWords(t *testing.T) {
	p, err := prog.Parse([]byte(leakProg))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := sim.NewTarget(sim.Config{Mode: sim.Eager, Mutant: "eager-no-wrprotect", SchedSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	good, err := sim.NewTarget(sim.Config{Mode: sim.Eager, SchedSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sigs := func(jr judgedRun) string {
		var s []string
		for _, is := range jr.v.Issues {
			s = append(s, is.Signature)
		}
		return strings.Join(s, " ")
	}
	// With every word: the finding names what the page held, one run.
	all := &seqTarget{targets: []agents.Target{bad}}
	jr := runJudged(all, p, agents.Options{})
	words := sigs(jr)
	if jr.herr != nil || jr.reruns != 0 || len(all.opts) != 1 || words == "" || strings.Contains(words, ":digest:") {
		t.Fatalf("every word: %d runs, reruns %d, issues %q, %v", len(all.opts), jr.reruns, words, jr.herr)
	}
	// Digests first: the first run knows the page by digest only, the
	// rerun with every word gives the same findings as above.
	df := &seqTarget{targets: []agents.Target{bad}}
	jr = runJudged(df, p, agents.Options{DigestsFirst: true})
	if len(df.opts) != 2 || !df.opts[0].DigestsFirst || df.opts[1].DigestsFirst || jr.reruns != 1 {
		t.Fatalf("digests first: %d runs (%+v), reruns %d", len(df.opts), df.opts, jr.reruns)
	}
	if got := sigs(jr); got != words {
		t.Errorf("digests first, after the rerun: issues %q, want %q", got, words)
	}
	// The rerun does not show it (a race that did not come back): the
	// digest finding stays and says so, and a replay with every word
	// counts as showing it again.
	flaky := &seqTarget{targets: []agents.Target{bad, good}}
	jr = runJudged(flaky, p, agents.Options{DigestsFirst: true})
	got := sigs(jr)
	if len(flaky.opts) != 2 || !strings.Contains(got, ":digest:") {
		t.Fatalf("rerun clean: %d runs, issues %q", len(flaky.opts), got)
	}
	for _, is := range jr.v.Issues {
		if isDigest(is.Signature) && !strings.Contains(is.Explanation, "did not show it again") {
			t.Errorf("%s: explanation does not say the rerun missed it: %s", is.Signature, is.Explanation)
		}
	}
	again := runJudged(&seqTarget{targets: []agents.Target{bad}}, p, agents.Options{})
	for _, is := range jr.v.Issues {
		if back, as := CameBack(is.Signature, again.v); !back {
			t.Errorf("%s did not come back in %q", is.Signature, sigs(again))
		} else if isDigest(is.Signature) && isDigest(as) {
			t.Errorf("%s came back as %s, want a finding with words", is.Signature, as)
		}
	}
	// A clean program runs once.
	ok := &seqTarget{targets: []agents.Target{good}}
	if jr := runJudged(ok, p, agents.Options{DigestsFirst: true}); len(ok.opts) != 1 || len(jr.v.Issues) != 0 {
		t.Errorf("clean: %d runs, issues %q", len(ok.opts), sigs(jr))
	}
}

func TestDigestBack(t *testing.T) {
	tests := []struct {
		sig, got string
		want     bool
	}{
		{"isolation:digest:anon-private", "isolation:parent-store-after-fork:anon-private", true},
		{"isolation:digest:anon-private", "isolation:parent-store-after-fork:memfd-private", false},
		{"snapshot:digest:anon-private", "isolation:parent-store-after-fork:anon-private", true},
		{"snapshot:digest:anon-private", "mapping:readable-is-absent:anon-private", false},
		{"memory:digest:memfd-shared", "shared:lost-store:memfd-shared", true},
		{"memory:digest:anon-private", "memory:digest:memfd-private", false},
		{"isolation:digest:anon-private", "isolation:digest:anon-private", true},
		{"isolation:digest:anon-private", "isolation::anon-private", false},
		{"isolation:parent-store-after-fork:anon-private", "isolation:parent-store-after-fork:anon-private", false},
	}
	for _, tc := range tests {
		if got := digestBack(tc.sig, tc.got); got != tc.want {
			t.Errorf("digestBack(%q, %q) = %v, want %v", tc.sig, tc.got, got, tc.want)
		}
	}
}
