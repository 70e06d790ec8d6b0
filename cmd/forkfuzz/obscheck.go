package main

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// validateObservation rejects an observation that no run of p can have
// produced (a hand-edited or mismatched file): judging it would report
// kernel findings that are really errors in the input. It checks shapes
// only (processes, regions, pages, operations in range; at least one
// view), never what a kernel may legitimately do.
func validateObservation(o *obs.Observation, p *prog.Program) error {
	nproc := p.NumForks() + 1
	nreg := len(p.Regions)
	if len(o.Views) == 0 && !o.Truncated {
		return fmt.Errorf("field views: empty, but every complete run has at least the main process's end view")
	}
	for i, v := range o.Views {
		at := func(format string, args ...any) error {
			return fmt.Errorf("field views[%d]: "+format, append([]any{i}, args...)...)
		}
		if v.Proc < 0 || v.Proc >= nproc {
			return at("proc %d: the program has processes 0..%d", v.Proc, nproc-1)
		}
		if v.At != obs.AtStart && v.At != obs.AtEnd && (v.At < 0 || v.At >= len(p.Ops)) {
			return at("at %d: want %d (start), %d (end) or an operation 0..%d", v.At, obs.AtStart, obs.AtEnd, len(p.Ops)-1)
		}
		for j, r := range v.Runs {
			if r.Region < 0 || r.Region >= nreg {
				return at("runs[%d]: region %d: the program has regions r0..r%d", j, r.Region, nreg-1)
			}
			if r.First < 0 || r.N < 1 || r.First+r.N > prog.SpanPages {
				return at("runs[%d]: pages %d..%d outside the region span (%d pages)", j, r.First, r.First+r.N-1, prog.SpanPages)
			}
			if r.State < obs.Readable || r.State > obs.BeyondEOF {
				return at("runs[%d]: state %d unknown", j, r.State)
			}
		}
		// Words first: a view sent without digests has them derived from
		// its words (obs.View.UnmarshalJSON), and a bad word is the
		// file's fault, not a page it does not hold.
		for j, w := range v.Words {
			if w.Region < 0 || w.Region >= nreg {
				return at("words[%d]: region %d: the program has regions r0..r%d", j, w.Region, nreg-1)
			}
			if w.Off >= prog.SpanBytes || w.Off%8 != 0 {
				return at("words[%d]: offset %#x not an aligned word of the region span", j, w.Off)
			}
		}
		for j, d := range v.Pages {
			if d.Region < 0 || d.Region >= nreg {
				return at("pages[%d]: region %d: the program has regions r0..r%d", j, d.Region, nreg-1)
			}
			if d.Page < 0 || d.Page >= prog.SpanPages {
				return at("pages[%d]: page %d outside the region span (%d pages)", j, d.Page, prog.SpanPages)
			}
		}
	}
	for i, tl := range o.Threads {
		if tl.Thread < 1 || tl.Thread > prog.MaxThreads {
			return fmt.Errorf("field threads[%d]: thread %d out of range 1..%d", i, tl.Thread, prog.MaxThreads)
		}
		for j, s := range tl.Stores {
			if s.Op < 0 || s.Op >= len(p.Ops) {
				return fmt.Errorf("field threads[%d].stores[%d]: op %d: the program has operations 0..%d", i, j, s.Op, len(p.Ops)-1)
			}
		}
	}
	for i, rb := range o.Rollbacks {
		if rb.Op < 0 || rb.Op >= len(p.Ops) || p.Ops[rb.Op].Kind != prog.OpFork {
			return fmt.Errorf("field rollbacks[%d]: op %d is not a fork operation of the program", i, rb.Op)
		}
		if rb.Fork < 0 || rb.Fork >= p.NumForks() {
			return fmt.Errorf("field rollbacks[%d]: fork f%d: the program has forks f0..f%d", i, rb.Fork, p.NumForks()-1)
		}
	}
	for i, e := range o.Events {
		if !e.Kind.Valid() {
			return fmt.Errorf("field events[%d]: unknown kind %q", i, e.Kind)
		}
	}
	return nil
}
