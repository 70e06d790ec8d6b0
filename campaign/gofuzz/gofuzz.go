//go:build gofuzz

// Package gofuzz is the go-fuzz (github.com/dvyukov/go-fuzz) entry point:
// bytes become a program (gen.FromBytes), which runs on the simulated
// kernel, every fork implementation in turn, under every oracle (the
// checker and the simulated kernel's page-table invariant). A finding
// panics, so go-fuzz records the input as a crasher; coverage of the
// model's code guides the search.
//
//	go install github.com/dvyukov/go-fuzz/go-fuzz@latest github.com/dvyukov/go-fuzz/go-fuzz-build@latest
//	cd campaign/gofuzz && go-fuzz-build && go-fuzz -bin gofuzz-fuzz.zip -workdir /tmp/gofuzz
//
// FORKFUZZ_SIM_MUTANT=NAME fuzzes one mutant instead (its fork mode only),
// which is how to see go-fuzz find a known bug.
package gofuzz

import "github.com/forkfuzz/forkfuzz/campaign/simbench"

// Fuzz is go-fuzz's entry point: 1 for interesting inputs, 0 otherwise.
func Fuzz(data []byte) int {
	return simbench.FuzzOne(data, simbench.FuzzMutantFromEnv())
}
