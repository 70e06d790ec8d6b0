package obs

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckForkImpl(t *testing.T) {
	ev := func(v string) ForkEvidence { return ForkEvidence{Fork: 0, Op: 3, Verdict: v, Probe: "x", PMDsWP: -1} }
	for _, c := range []struct {
		profile string
		verdict string
		ok      bool
	}{
		{"async-fork", EvDeferred, true},
		{"async-fork", EvEager, false},
		{"async-fork", EvUnknown, true},
		{"odf", EvDeferred, true},
		{"stock", EvEager, true},
		{"stock", EvDeferred, false},
	} {
		o := &Observation{ForkImpl: &ForkImpl{Profile: c.profile, Applied: []string{"memory.async_fork=1"}, Forks: []ForkEvidence{ev(c.verdict)}}}
		err := CheckForkImpl(o)
		var fe *ForkImplError
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &fe) || !strings.Contains(err.Error(), "fork f0 (op 3)"))) {
			t.Errorf("%s with a %s fork: %v", c.profile, c.verdict, err)
		}
	}
	// An undecided fork is tolerated when another decides.
	o := &Observation{ForkImpl: &ForkImpl{Profile: "async-fork", Forks: []ForkEvidence{ev(EvUnknown), ev(EvDeferred)}}}
	if err := CheckForkImpl(o); err != nil {
		t.Errorf("one unknown and one deferred fork: %v", err)
	}
	if u := Undecided(o); u != "" {
		t.Errorf("undecided with a deferred fork: %s", u)
	}
	o.ForkImpl.Forks = o.ForkImpl.Forks[:1]
	if u := Undecided(o); !strings.Contains(u, "fork f0 (op 3): unknown") {
		t.Errorf("undecided: %q", u)
	}
	if err := CheckForkImpl(&Observation{}); err != nil {
		t.Errorf("no profile: %v", err)
	}
}
