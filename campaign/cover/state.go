package cover

import (
	"hash/fnv"
	"slices"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Memory-state signal: what state the program's memory was in at its
// forks, beside the kernel code it reached. A program that brings a fork
// to a new combination of page kinds (THP mapped by a PMD or by PTEs,
// swapped out, KSM, mlocked, uffd-wp, the zeropages, hugetlb, page cache;
// pages left exclusive or shared after the fork), with new operations
// right after it in the parent and the child, writer threads caught
// inside the fork, or a failed fork stopping at a new place, enters the
// corpus even when its KCOV edges are old: the same copy_page_range lines
// run for a PTE-mapped THP that a pin keeps exclusive and for a plain
// page, and fork bugs live in such combinations. It needs no KCOV.
//
// The page census is taken for some programs only (campaign.Config's
// CensusEvery), so the page-kind features come from those.

// StateFeatures lists the memory-state features of program p's run o,
// sorted and without duplicates, as readable names.
func StateFeatures(p *prog.Program, o *obs.Observation) []string {
	if p == nil || o == nil {
		return nil
	}
	var out []string
	add := func(parts ...string) { out = append(out, strings.Join(parts, ":")) }
	for _, fp := range o.ForkPages {
		if fp.Err != "" || fp.Fork < 0 || fp.Fork >= p.NumForks() {
			continue
		}
		kinds := pageKinds(fp)
		if len(kinds) == 0 {
			continue
		}
		parent, child := nextOps(p, fp.Fork)
		add("fork-pages", strings.Join(kinds, "+"))
		for _, k := range kinds {
			add("fork-page", k, "parent", parent)
			add("fork-page", k, "child", child)
		}
	}
	for i := range o.Ops {
		ov := o.Ops[i].Overlap
		if ov == nil || i >= len(p.Ops) {
			continue
		}
		who := "writers"
		if ov.Movers {
			who = "movers"
		}
		if ov.Inside > 0 {
			add("fork-overlap", who, "inside")
		}
		if ov.Blocked > 0 {
			add("fork-overlap", who, "blocked")
		}
	}
	for _, r := range o.Rollbacks {
		site, _, _ := strings.Cut(strings.TrimSpace(r.Site), " ")
		if r.Silent {
			site = "silent"
		}
		add("fork-failed", r.Cause, r.Injection, r.Part, site)
	}
	if o.ForkImpl != nil {
		for _, f := range o.ForkImpl.Forks {
			add("fork-impl", f.Verdict, f.Probe)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// StateSignal is StateFeatures hashed (64-bit FNV-1a, never 0).
func StateSignal(p *prog.Program, o *obs.Observation) []uint64 {
	names := StateFeatures(p, o)
	out := make([]uint64, 0, len(names))
	for _, n := range names {
		h := fnv.New64a()
		h.Write([]byte(n))
		out = append(out, h.Sum64()|1)
	}
	return out
}

// pageKinds names the kinds of pages one census found at a fork.
func pageKinds(fp obs.ForkPages) []string {
	var ks []string
	has := func(n int, name string) {
		if n > 0 {
			ks = append(ks, name)
		}
	}
	has(fp.Swapped, "swapped")
	has(fp.UffdWP, "uffd-wp")
	has(fp.PMDMapped, "thp-pmd")
	has(fp.THP-fp.PMDMapped, "thp-pte")
	has(fp.KSM, "ksm")
	has(fp.Mlocked, "mlocked")
	has(fp.Zero, "zero")
	has(fp.HugeZero, "huge-zero")
	has(fp.Hugetlb, "hugetlb")
	has(fp.File, "file")
	has(fp.Exclusive, "exclusive")
	has(fp.Shared, "shared")
	return ks
}

// nextOps names the kinds of the first operation the parent's main thread
// and the child run after fork f ("-": none).
func nextOps(p *prog.Program, f int) (parent, child string) {
	parent, child = "-", "-"
	i := p.ForkOp(f)
	if i < 0 {
		return
	}
	forker := p.Ops[i].Proc
	for _, op := range p.Ops[i+1:] {
		if parent == "-" && op.Proc == forker && op.Thread == 0 {
			parent = op.Kind.String()
		}
		if child == "-" && op.Proc == f+1 {
			child = op.Kind.String()
		}
	}
	return
}
