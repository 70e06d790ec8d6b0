package executor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Corruptions lists the test-only ways the executor can falsify an
// observation (Options.Corrupt), to prove that the oracles catch them.
var Corruptions = map[string]string{
	"child-sees-parent-write": "the first child start view shows slot 0 of the first parent store to a private region made between that fork and its wait",
	"child-misses-write":      "the first child start view loses the last non-zero word it saw in a private region",
}

// CorruptionNames returns the names of Corruptions, sorted.
func CorruptionNames() []string {
	var names []string
	for n := range Corruptions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func corrupt(p *prog.Program, o *obs.Observation, name string) error {
	o.Corruption = name
	switch name {
	case "child-sees-parent-write":
		for vi := range o.Views {
			v := &o.Views[vi]
			if v.At != obs.AtStart || v.Proc == 0 {
				continue
			}
			f := v.Proc - 1
			fi := p.ForkOp(f)
			parent := p.Ops[fi].Proc
			for j := fi + 1; j < len(p.Ops); j++ {
				op := p.Ops[j]
				if op.Proc == parent && (op.Kind == prog.OpWait && op.Fork == f) {
					break
				}
				if op.Proc != parent || op.Kind != prog.OpStore || !o.Ops[j].Ran || o.Ops[j].Skipped != 0 ||
					p.Regions[op.Region].Kind.Shared() {
					continue
				}
				v.SetWord(op.Region, op.Off, prog.SlotValue(j, 0))
				return nil
			}
		}
		return fmt.Errorf("corruption %s: no parent store to a private region between a fork and its wait", name)
	case "child-misses-write":
		for vi := range o.Views {
			v := &o.Views[vi]
			if v.At != obs.AtStart || v.Proc == 0 {
				continue
			}
			for wi := len(v.Words) - 1; wi >= 0; wi-- {
				w := v.Words[wi]
				if !p.Regions[w.Region].Kind.Shared() {
					v.SetWord(w.Region, w.Off, 0)
					return nil
				}
			}
		}
		return fmt.Errorf("corruption %s: no child view with a non-zero private word", name)
	}
	if ok, err := corruptRollback(o, name); ok { // failnth.go
		return err
	}
	return fmt.Errorf("unknown corruption %q (known: %s)", name, strings.Join(CorruptionNames(), ", "))
}
