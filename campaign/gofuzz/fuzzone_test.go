package gofuzz

import "testing"

// FuzzSim decodes bytes into programs and runs them on every unmodified
// fork model under every oracle; coverage of the model guides the fuzzer.
// With FORKFUZZ_SIM_MUTANT=NAME it fuzzes that mutant instead and should
// fail quickly.
//
//	go test -fuzz FuzzSim -fuzztime 60s ./campaign/gofuzz
func FuzzSim(f *testing.F) {
	f.Add([]byte("forkfuzz"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(make([]byte, 64))
	mutant := FuzzMutantFromEnv()
	f.Fuzz(func(t *testing.T, data []byte) {
		FuzzOne(data, mutant)
	})
}
