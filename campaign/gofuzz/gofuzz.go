//go:build gofuzz

// Package gofuzz is the go-fuzz (github.com/dvyukov/go-fuzz) entry point:
// bytes become a program (gen.FromBytes), which runs on the simulated
// kernel, every fork implementation in turn, under every oracle (the
// checker and the simulated kernel's page-table invariant). A finding
// panics, so go-fuzz records the input as a crasher; coverage of the
// model's code guides the search. FuzzParse fuzzes the program parser.
//
// `make gofuzz` installs go-fuzz, builds both entry points in a scratch
// copy of the module and runs them (see the Makefile for why a scratch
// copy); by hand:
//
//	go-fuzz-build -preserve crypto/internal/fips140/bigmod [-func FuzzParse]
//	go-fuzz -bin gofuzz-fuzz.zip -workdir /tmp/gofuzz
//
// FORKFUZZ_SIM_MUTANT=NAME fuzzes one mutant instead (its fork mode only),
// which is how to see go-fuzz find a known bug.
package gofuzz

import (
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Fuzz is go-fuzz's entry point: 1 for interesting inputs, 0 otherwise.
func Fuzz(data []byte) int {
	return FuzzOne(data, FuzzMutantFromEnv())
}

// FuzzParse fuzzes the program parser with the property of the native
// FuzzParse (prog.RoundTrip); accepted programs are interesting.
func FuzzParse(data []byte) int {
	accepted, err := prog.RoundTrip(data)
	if err != nil {
		panic(err)
	}
	if accepted {
		return 1
	}
	return 0
}
