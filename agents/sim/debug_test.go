package sim

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
)

// TestDebugProgram prints the run of generated program SIM_DEBUG=i (the
// programs of TestCleanModelsPass) on the eager model, for debugging.
func TestDebugProgram(t *testing.T) {
	s := os.Getenv("SIM_DEBUG")
	if s == "" {
		t.Skip()
	}
	i, _ := strconv.Atoi(s)
	p := gen.Generate(rand.New(rand.NewPCG(11, uint64(i))), gen.DefaultWeights())
	t.Log("\n" + string(p.Format()))
	o, _, _ := Run(p, Config{Mode: Eager}, 0)
	for i, r := range o.Ops {
		t.Logf("op %d: %+v", i, r)
	}
	for _, v := range o.Views {
		t.Logf("view %d %d: %v", v.Proc, v.At, v.VMAs)
	}
}
