package gofuzz

import (
	"fmt"
	"os"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// FuzzMutantFromEnv returns the mutant named by $FORKFUZZ_SIM_MUTANT ("" if
// unset), for fuzzing entry points.
func FuzzMutantFromEnv() string { return os.Getenv("FORKFUZZ_SIM_MUTANT") }

// FuzzOne is the body of the fuzzing entry points (go-fuzz's Fuzz and the
// native FuzzSim): decode data into a program, run it on every fork
// implementation (or only the mutant's, when mutant is set) with a
// scheduler seed taken from the data, and panic on any finding. It returns
// 1 when the program forks (interesting for go-fuzz), else 0.
func FuzzOne(data []byte, mutant string) int {
	p := gen.FromBytes(data)
	var seed uint64
	for i, b := range data {
		if i >= 8 {
			break
		}
		seed = seed<<8 | uint64(b)
	}
	modes := []sim.Mode{sim.Eager, sim.OnDemand, sim.Async}
	if mutant != "" {
		m, ok := sim.LookupMutant(mutant)
		if !ok {
			panic(fmt.Sprintf("unknown mutant %q", mutant))
		}
		modes = []sim.Mode{m.Mode}
	}
	for _, mode := range modes {
		t, err := sim.NewTarget(sim.Config{Mode: mode, Mutant: mutant, SchedSeed: seed})
		if err != nil {
			panic(err)
		}
		o, err := t.Run(p, agents.Options{})
		if err != nil {
			panic(fmt.Sprintf("sim: %v\n%s", err, p.Format()))
		}
		v, err := judge.Judge(p, o, nil)
		if err != nil {
			panic(fmt.Sprintf("judge: %v\n%s", err, p.Format()))
		}
		if is := v.Issues; len(is) > 0 {
			var b strings.Builder
			for _, x := range is {
				b.WriteString(x.Explanation + "\n")
			}
			panic(fmt.Sprintf("%v (sched seed %d): %s\nprogram:\n%s", t.Name(), t.RunSeed(p), b.String(), p.Format()))
		}
	}
	if p.NumForks() > 0 {
		return 1
	}
	return 0
}
