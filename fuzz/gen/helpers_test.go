package gen

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

var seedFlag = flag.Uint64("seed", 0, "random seed for property tests (0: time-based)")

// testRand returns a seeded rand and logs the seed, so a failure can be
// replayed with -seed.
func testRand(t testing.TB) (*rand.Rand, uint64) {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed
}

// iters returns n, or n/10 under -short.
func iters(n int) int {
	if testing.Short() {
		return max(n/10, 1)
	}
	return n
}

// checkProgram fails the test unless p validates and round-trips exactly.
func checkProgram(t testing.TB, p *prog.Program, what string) {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatalf("%s: invalid program: %v\n%s", what, err, p.Format())
	}
	text := p.Format()
	q, err := prog.Parse(text)
	if err != nil {
		t.Fatalf("%s: canonical text does not parse: %v\n%s", what, err, text)
	}
	if !reflect.DeepEqual(normalize(p), normalize(q)) || !bytes.Equal(q.Format(), text) {
		t.Fatalf("%s: round trip differs:\n%s\n---\n%s", what, text, q.Format())
	}
}

// normalize makes empty and nil operation lists compare equal.
func normalize(p *prog.Program) *prog.Program {
	q := p.Clone()
	if len(q.Ops) == 0 {
		q.Ops = nil
	}
	return q
}

func mustParse(t testing.TB, text string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte("forkfuzz v1\n" + text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return p
}
