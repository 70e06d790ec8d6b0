package agents

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// fakeImpl is a target that records evidence as told (the real one needs
// a kernel with the implementation; agents/vm's TestAsyncForkKernel boots
// one).
type fakeImpl struct {
	verdict map[string]string // profile -> verdict of every fork
	word    map[string]uint64 // profile -> value the child sees
	runs    []string
}

func (f *fakeImpl) Name() string { return "fake" }
func (f *fakeImpl) Close() error { return nil }
func (f *fakeImpl) Run(p *prog.Program, opt Options) (*obs.Observation, error) {
	f.runs = append(f.runs, opt.ForkImpl)
	o := &obs.Observation{Ops: make([]obs.OpResult, len(p.Ops)),
		Views: []obs.View{{Proc: 1, At: obs.AtStart, Words: []obs.Word{{Region: 0, Off: 0, Value: f.word[opt.ForkImpl]}},
			// shmem inode numbers differ from run to run: never a difference
			VMAs: []obs.VMA{{Start: 1 << 40, End: 1<<40 + 4096, Prot: "rw-s", Inode: uint64(len(f.runs))}}}},
		Maps:     fmt.Sprintf("10000000000-10000001000 rw-s 00000000 00:01 %d /dev/zero (deleted)\n", len(f.runs)),
		ForkImpl: &obs.ForkImpl{Profile: opt.ForkImpl, Forks: []obs.ForkEvidence{{Fork: 0, Op: 1, Verdict: f.verdict[opt.ForkImpl]}}}}
	return o, nil
}

func TestForkImplTarget(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1 thp=off\nstore r0 off=0x0 count=1\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"async-fork": obs.EvDeferred, "stock": obs.EvEager}
	// Evidence as required, same views: clean, two runs.
	f := &fakeImpl{verdict: good, word: map[string]uint64{"async-fork": 7, "stock": 7}}
	w := &ForkImplTarget{Target: f, Profile: "async-fork", Differential: true}
	if _, err := w.Run(p, Options{}); err != nil || strings.Join(f.runs, ",") != "async-fork,stock" {
		t.Fatalf("clean differential: %v (runs %v)", err, f.runs)
	}
	// The mode did not take effect: a harness error, not an event.
	f = &fakeImpl{verdict: map[string]string{"async-fork": obs.EvEager}}
	w = &ForkImplTarget{Target: f, Profile: "async-fork"}
	_, err = w.Run(p, Options{})
	var fe *obs.ForkImplError
	if _, isEv := AsEvent(err); !errors.As(err, &fe) || isEv {
		t.Fatalf("eager forks under async-fork: %v, want a ForkImplError harness error", err)
	}
	// A difference: an event naming the first differing view.
	f = &fakeImpl{verdict: good, word: map[string]uint64{"async-fork": 7, "stock": 8}}
	w = &ForkImplTarget{Target: f, Profile: "async-fork", Differential: true}
	o, err := w.Run(p, Options{})
	ev, ok := AsEvent(err)
	if !ok || o == nil || ev.Oracle() != "forkimpl-differential" || !strings.Contains(ev.Explanation(), "view child of f0 at start: r0+0x0 holds 0x7 with the implementation, 0x8 with stock fork") {
		t.Fatalf("differing views: %v", err)
	}
	if w.Diffs != 1 || w.Compared != 1 {
		t.Errorf("summary: %s", w.Summary())
	}
}

func TestNewForkImplTarget(t *testing.T) {
	if _, err := NewForkImplTarget(&fakeImpl{}, "prctl65", false); err == nil || !strings.Contains(err.Error(), "unknown fork implementation") {
		t.Errorf("unknown profile: %v", err)
	}
	if _, err := NewForkImplTarget(&fakeImpl{}, "stock", false); err == nil || !strings.Contains(err.Error(), "cannot switch fork implementations") {
		t.Errorf("a target without executor: %v", err)
	}
	n := NewNative(nil)
	defer n.Close()
	_, err := NewForkImplTarget(n, "odf", false)
	if hasODF := strings.Contains(strings.Join(n.ForkImpls(), ","), "odf"); hasODF != (err == nil) {
		t.Errorf("odf on the host (has it: %v): %v", hasODF, err)
	}
}

// TestCalibrate: the check at campaign start stops at the first decided
// fork, fails when the mode did not take effect or (for a deferring
// profile) never decides, and tolerates an undecided stock fork.
func TestCalibrate(t *testing.T) {
	var fe *obs.ForkImplError
	for _, c := range []struct {
		profile, verdict string
		runs             int
		fail             bool
	}{
		{"async-fork", obs.EvDeferred, 1, false},
		{"async-fork", obs.EvEager, 1, true},
		{"async-fork", obs.EvUnknown, MaxCalibrationRuns, true},
		{"stock", obs.EvEager, 1, false},
		{"stock", obs.EvDeferred, 1, true},
		{"stock", obs.EvUnknown, MaxCalibrationRuns, false},
	} {
		f := &fakeImpl{verdict: map[string]string{c.profile: c.verdict}}
		w := &ForkImplTarget{Target: f, Profile: c.profile}
		err := w.Calibrate()
		if c.fail != errors.As(err, &fe) || (!c.fail && err != nil) {
			t.Errorf("%s, every fork %s: %v, want failure %v", c.profile, c.verdict, err, c.fail)
		}
		if len(f.runs) != c.runs {
			t.Errorf("%s, every fork %s: %d calibration runs, want %d", c.profile, c.verdict, len(f.runs), c.runs)
		}
		if !c.fail && !strings.Contains(w.Summary(), "calibration: ") {
			t.Errorf("%s: the summary does not say what the calibration found: %s", c.profile, w.Summary())
		}
		if w.Runs != 0 {
			t.Errorf("calibration runs counted as the campaign's: %d", w.Runs)
		}
	}
}

// TestUndecidedRuns: MaxUndecidedRuns runs in a row in which no fork could
// show whether a deferring implementation took effect are a harness
// error; under stock they are not (an undecided stock fork hides no
// deferral the probe could have caught), as in Calibrate.
func TestUndecidedRuns(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1 thp=off\nfork f0\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		profile string
		fail    bool
	}{{"async-fork", true}, {"stock", false}} {
		w := &ForkImplTarget{Target: &fakeImpl{verdict: map[string]string{c.profile: obs.EvUnknown}}, Profile: c.profile}
		var fe *obs.ForkImplError
		var last error
		for i := 0; i < MaxUndecidedRuns; i++ {
			_, last = w.Run(p, Options{})
			if i < MaxUndecidedRuns-1 && last != nil {
				t.Fatalf("%s: run %d: %v", c.profile, i+1, last)
			}
		}
		if errors.As(last, &fe) != c.fail {
			t.Errorf("%s: %d undecided runs in a row gave %v, want a harness error: %v", c.profile, MaxUndecidedRuns, last, c.fail)
		}
		if w.Unknown != MaxUndecidedRuns {
			t.Errorf("%s: the summary counts %d unknown forks, want %d", c.profile, w.Unknown, MaxUndecidedRuns)
		}
	}
}
