package executor

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestParseChildGrow(t *testing.T) {
	for _, c := range []struct {
		in   string
		want childGrow
		err  string
	}{
		{"", growNone, ""}, // DefaultChildKcovGrow
		{"all", growAll, ""},
		{"ops", growOps, ""},
		{"none", growNone, ""},
		{"forks", 0, `child_kcov_grow "forks": want "all", "ops" or "none"`},
	} {
		g, err := parseChildGrow(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseChildGrow(%q) = %v, %v; want error %q", c.in, g, err, c.err)
			}
			continue
		}
		if err != nil || g != c.want {
			t.Errorf("parseChildGrow(%q) = %v, %v; want %v", c.in, g, err, c.want)
		}
	}
}

// What a child's operation grows its buffer to under each policy.
func TestGrowFor(t *testing.T) {
	for _, c := range []struct {
		policy       childGrow
		size         int
		fork, filled bool
		want         int
	}{
		{growAll, 2, true, false, 2},
		{growAll, 1, false, false, 1},
		{growAll, 0, false, true, 1},
		{growAll, 0, false, false, 0},
		{growOps, 2, true, false, 0},
		{growOps, 1, false, false, 1},
		{growOps, 0, false, true, 1},
		{growNone, 2, true, false, 0},
		{growNone, 1, false, false, 0},
		{growNone, 0, false, true, 0},
	} {
		k := &kcovState{growPolicy: c.policy}
		if got := k.growFor(c.size, c.fork, c.filled); got != c.want {
			t.Errorf("policy %d: growFor(%d, fork %v, filled %v) = %d, want %d", c.policy, c.size, c.fork, c.filled, got, c.want)
		}
	}
	var k *kcovState
	if got := k.growFor(2, true, true); got != 0 {
		t.Errorf("no KCOV state: growFor = %d, want 0", got)
	}
}

// A buffer that filled during a fork does not make the child's later
// operations grow; one that filled during another operation does.
func TestFilledOutsideFork(t *testing.T) {
	p := &prog.Program{Ops: []prog.Op{{Kind: prog.OpFork, Fork: 0}, {Kind: prog.OpStore}}}
	for _, c := range []struct {
		word uint64 // overWord[1][0]: 2 + the op during which the buffer filled, 0 not
		want bool
	}{
		{0, false},
		{2, false}, // op 0, the fork
		{3, true},  // op 1, the store
		{1, true},  // before the first op
	} {
		k := &kcovState{ok: true}
		k.overWord[1] = []uint64{c.word, 0}
		m := &machine{kc: k, ks: 1, p: p}
		if got := m.filledOutsideFork(); got != c.want {
			t.Errorf("overWord %d: filledOutsideFork = %v, want %v", c.word, got, c.want)
		}
	}
}
