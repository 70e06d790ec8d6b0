package hostcmp

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestMain re-executes the test binary with the GODEBUG setting the
// executor needs.
func TestMain(m *testing.M) {
	if err := executor.ReexecWithGODEBUG(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestAgreesWithHost runs generated programs on the host kernel and on the
// simulated eager fork and compares the observations.
// HOSTCMP_N sets the number of programs (default 300, 60 with -short).
func TestAgreesWithHost(t *testing.T) {
	if os.Getenv("HOSTCMP_SKIP") != "" {
		t.Skip("HOSTCMP_SKIP set")
	}
	x, err := executor.New()
	if err != nil {
		t.Fatal(err)
	}
	n := 300
	if testing.Short() {
		n = 60
	}
	if s := os.Getenv("HOSTCMP_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	seed := uint64(1)
	if s := os.Getenv("HOSTCMP_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d, %d programs (HOSTCMP_SEED, HOSTCMP_N)", seed, n)
	bad, ran := 0, 0
	// The simulator models the GUP writes (procmem, pvwrite) but not pipes,
	// O_DIRECT, io_uring or userfaultfd: programs with those cannot agree.
	w := gen.DefaultWeights()
	w.ODirect, w.Vmsplice, w.ReadPipe, w.UringReg, w.UringRead, w.UffdWP = 0, 0, 0, 0, 0, 0
	w.FailNthProb = 0 // the host has no fault injection
	for i := 0; ran < n; i++ {
		p := gen.Generate(rand.New(rand.NewPCG(seed, uint64(i))), w)
		if hasThreads(p) {
			continue // concurrent: host and sim may interleave differently
		}
		if writesIntoKilled(p) {
			continue // SIGKILL is asynchronous: whether the child's memory is still there varies
		}
		ran++
		host, err := x.Run(p, executor.Options{})
		if err != nil {
			t.Fatalf("program %d: host: %v", i, err)
		}
		so, _, err := sim.Run(p, sim.Config{Mode: sim.Eager, Lacks: Lacks(p, host)}, 0)
		if err != nil {
			t.Fatalf("program %d: sim: %v", i, err)
		}
		if d := Compare(p, host, so); len(d) > 0 {
			bad++
			if bad <= 3 || os.Getenv("HOSTCMP_V") != "" {
				t.Errorf("program %d (seed %d) differs (host/sim):\n%s", i, seed, p.Format())
				for _, s := range d {
					t.Errorf("  %s", s)
				}
			} else {
				t.Errorf("program %d: %s", i, d[0])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d programs differ", bad, n)
	}
}

func hasThreads(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Thread > 0 || op.Kind == prog.OpJoin {
			return true
		}
	}
	return false
}

// TestScratch runs the programs of $SIM_SCRATCH (separated by "====") on
// both and prints the differences.
func TestScratch(t *testing.T) {
	path := os.Getenv("SIM_SCRATCH")
	if path == "" {
		t.Skip("SIM_SCRATCH not set")
	}
	x, err := executor.New()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, text := range strings.Split(string(b), "====\n") {
		p, err := prog.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		host, err := x.Run(p, executor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		so, _, _ := sim.Run(p, sim.Config{Mode: sim.Eager, Lacks: Lacks(p, host)}, 0)
		t.Log("-----")
		for i, r := range host.Ops {
			t.Logf("op %d %v: host errno %d ret %#x / sim errno %d ret %#x", i, p.Ops[i], r.Errno, r.Ret, so.Ops[i].Errno, so.Ops[i].Ret)
		}
		for _, s := range Compare(p, host, so) {
			t.Log(s)
		}
		t.Log("host maps:\n" + host.Maps)
		t.Log("sim maps:\n" + so.Maps)
	}
}
