package sim

import (
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Judge is every oracle on a run (the judge package; tests of the model
// use it the way campaigns do).
func Judge(p *prog.Program, o *obs.Observation) []judge.Issue {
	v, err := judge.Judge(p, o, nil)
	if err != nil {
		panic(err)
	}
	return v.Issues
}

// KernelFindings returns the page-table events of o (the simulated
// kernel's own invariants), as signatures and texts.
func KernelFindings(o *obs.Observation) (sigs, texts []string) {
	for _, e := range o.Events {
		switch e.Kind {
		case obs.EvPMDRWNotRestored:
			sigs = append(sigs, "pagetable:pmd-rw-not-restored")
		case obs.EvWriteFaultHang:
			sigs = append(sigs, "pagetable:write-fault-hang")
		case obs.EvPageTableError:
			sigs = append(sigs, "pagetable:event")
		default:
			continue
		}
		texts = append(texts, e.Text)
	}
	return sigs, texts
}

func eventsText(es []obs.Event) string {
	var b []byte
	for _, e := range es {
		b = append(b, e.String()...)
		b = append(b, '\n')
	}
	return string(b)
}
