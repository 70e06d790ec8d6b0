package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func benchPrograms(n int) []*prog.Program {
	ps := make([]*prog.Program, n)
	for i := range ps {
		ps[i] = gen.Generate(rand.New(rand.NewPCG(5, uint64(i))), gen.DefaultWeights())
	}
	return ps
}

// BenchmarkRun measures simulated programs per second on one core (the
// default generator's programs), per fork implementation, without oracles.
func BenchmarkRun(b *testing.B) {
	ps := benchPrograms(256)
	for _, mode := range []Mode{Eager, OnDemand, Async} {
		b.Run(mode.String(), func(b *testing.B) {
			t, _ := NewTarget(Config{Mode: mode})
			for i := 0; b.Loop(); i++ {
				if _, err := t.Run(ps[i%len(ps)], execOpts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "programs/s")
		})
	}
}

// BenchmarkRunJudge is BenchmarkRun plus every oracle (checker.Check and
// the page-table invariant), i.e. what a campaign pays per program.
func BenchmarkRunJudge(b *testing.B) {
	ps := benchPrograms(256)
	t, _ := NewTarget(Config{Mode: Async})
	for i := 0; b.Loop(); i++ {
		p := ps[i%len(ps)]
		o, err := t.Run(p, execOpts)
		if err != nil {
			b.Fatal(err)
		}
		Judge(p, o)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "programs/s")
}

// BenchmarkEveryPage measures what the every-page checks cost a campaign
// on the simulated kernel (run and judge, Async): programs of the default
// weights without them and without pre-fork advice (everypage=off, the
// weights before they existed), the default weights (writers spanning
// every page sometimes, pre-fork advice) and the everypage profile,
// each as programs/s and judged pages per program, in the same run:
//
//	go test -run '^$' -bench EveryPage ./agents/sim/
func BenchmarkEveryPage(b *testing.B) {
	off := gen.DefaultWeights()
	off.EveryPageProb, off.EveryPageChildProb, off.EveryPageWriterProb, off.PreForkAdviceProb = 0, 0, 0, 0
	every, _ := gen.Profile("everypage")
	for _, c := range []struct {
		name string
		w    gen.Weights
	}{{"everypage=off", off}, {"default", gen.DefaultWeights()}, {"profile=everypage", every}} {
		b.Run(c.name, func(b *testing.B) {
			ps := make([]*prog.Program, 256)
			for i := range ps {
				ps[i] = gen.Generate(rand.New(rand.NewPCG(5, uint64(i))), c.w)
			}
			t, _ := NewTarget(Config{Mode: Async})
			pages := 0
			for i := 0; b.Loop(); i++ {
				p := ps[i%len(ps)]
				o, err := t.Run(p, execOpts)
				if err != nil {
					b.Fatal(err)
				}
				v, err := judge.Judge(p, o, nil)
				if err != nil {
					b.Fatal(err)
				}
				pages += v.Judged.Pages
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "programs/s")
			b.ReportMetric(float64(pages)/float64(b.N), "pages/program")
		})
	}
}
