package gen

import "github.com/forkfuzz/forkfuzz/fuzz/prog"

// Features are the page and region kinds the kernel treats specially at
// fork that a program reaches (by its text: whether the kernel really
// made pages so is in the observation, obs.ForkPages), and the systematic
// checks it carries. FeatureNames lists them in a fixed order;
// TestFeatureFrequencies measures how often generated programs reach each.
var FeatureNames = []string{
	"mlock", "thp", "collapse", "pte-mapped-thp", "pinned", "dontfork", "wipeonfork",
	"uffd-wp", "ksm", "pageout", "writers", "every-page-store", "every-page-writer",
	"zeropage", "huge-zeropage", "hugetlb", "file",
}

// Features returns which of FeatureNames p reaches.
func Features(p *prog.Program) map[string]bool {
	f := make(map[string]bool)
	thp := make([]bool, len(p.Regions))
	for i, r := range p.Regions {
		thp[i] = r.THP == prog.THPOn
	}
	for _, op := range p.Ops {
		if op.Kind == prog.OpMadvise && op.Advice == prog.AdvHugepage && op.Region < len(thp) {
			thp[op.Region] = true
		}
	}
	for i, r := range p.Regions {
		if thp[i] && r.Pages >= prog.PMDSize/prog.PageSize && r.Kind == prog.AnonPrivate {
			f["thp"] = true
		}
	}
	zeroReads(p, thp, f)
	for _, r := range p.Regions {
		if r.Kind.Hugetlb() {
			f["hugetlb"] = true
		}
		if r.Kind.FS() != prog.NoFS {
			f["file"] = true
		}
	}
	everyPage := func(op prog.Op) bool {
		return op.Stride == prog.PageSize && op.Region < len(p.Regions) &&
			op.Count >= min(p.Regions[op.Region].Pages, DefaultWeights().MaxStorePages)
	}
	for _, op := range p.Ops {
		switch {
		case op.Kind == prog.OpMlock:
			f["mlock"] = true
		case op.Kind == prog.OpMadvise:
			switch op.Advice {
			case prog.AdvCollapse:
				f["collapse"] = true
			case prog.AdvDontfork:
				f["dontfork"] = true
			case prog.AdvWipeonfork:
				f["wipeonfork"] = true
			case prog.AdvMergeable:
				f["ksm"] = true
			case prog.AdvPageout:
				f["pageout"] = true
			}
		case op.Kind == prog.OpUffdWP:
			f["uffd-wp"] = true
		case op.Kind == prog.OpStoreLoop:
			f["writers"] = true
			if everyPage(op) {
				f["every-page-writer"] = true
			}
		case op.Kind == prog.OpStore && everyPage(op):
			f["every-page-store"] = true
		}
		if op.Kind.Pinned() {
			f["pinned"] = true
		}
		// A VMA change that does not cover whole PMDs of a THP region
		// splits a PMD mapping into PTEs (mprotect, munmap, madvise
		// dontneed/dontfork of part of a huge page).
		if op.Kind.HasRange() && op.Kind != prog.OpMmap && op.Region < len(thp) && thp[op.Region] &&
			(op.Off%prog.PMDSize != 0 || op.Len%prog.PMDSize != 0) && p.Regions[op.Region].Pages >= prog.PMDSize/prog.PageSize {
			f["pte-mapped-thp"] = true
		}
	}
	return f
}

// zeroReads sets zeropage when the main process reads a private anonymous
// region before a later fork of its own (a check reads every page of every
// region; madvise populate-read faults its range in for reading): a page
// not yet written is then the shared zeropage at the fork. huge-zeropage:
// the region is a THP one of at least a PMD, where a read fault maps the
// huge zeropage.
func zeroReads(p *prog.Program, thp []bool, f map[string]bool) {
	read := make([]bool, len(p.Regions))
	for _, op := range p.Ops {
		if op.Proc != 0 {
			continue
		}
		switch {
		case op.Kind == prog.OpCheck:
			for i := range read {
				read[i] = true
			}
		case op.Kind == prog.OpMadvise && op.Advice == prog.AdvPopulateRead && op.Region < len(read):
			read[op.Region] = true
		case op.Kind == prog.OpFork:
			for i, r := range p.Regions {
				if !read[i] || r.Kind != prog.AnonPrivate {
					continue
				}
				f["zeropage"] = true
				if thp[i] && r.Pages >= prog.PMDSize/prog.PageSize {
					f["huge-zeropage"] = true
				}
			}
		}
	}
}
