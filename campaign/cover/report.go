package cover

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// ReportOptions tune Report.
type ReportOptions struct {
	// Symbols replaces the corpus's own kallsyms (e.g. a System.map).
	Symbols     *Symbols
	SymbolsFrom string
	// All lists every covered function, not only fork/mm ones.
	All bool
	// Lines, from the kernel's vmlinux (LoadLines), maps PCs to source
	// lines; LinesFrom names it. ListLines lists every covered line.
	Lines     *Lines
	LinesFrom string
	ListLines bool
}

// Report writes what the coverage corpora under workdir reached: per
// kernel build, PCs and edges, then covered functions of kernel/fork.c and
// mm/*.c (by file, then by function) when symbols are at hand, or raw PC
// counts when not.
func Report(w io.Writer, workdir string, opt ReportOptions) error {
	dirs, _ := filepath.Glob(filepath.Join(workdir, "corpus", "*"))
	n := 0
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.json"))
		if len(files) == 0 {
			continue
		}
		n++
		if err := reportDir(w, d, files, opt); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", workdir, ErrNoCorpus)
	}
	return nil
}

func reportDir(w io.Writer, dir string, files []string, opt ReportOptions) error {
	pcs, edges, err := readCoverage(files)
	if err != nil {
		return err
	}
	syms, from := opt.Symbols, opt.SymbolsFrom
	if syms == nil {
		if s, err := LoadSymbols(filepath.Join(dir, "kallsyms")); err == nil {
			syms, from = s, "kallsyms of the guest kernel"
		}
	}
	fmt.Fprintf(w, "%s: %d programs, %d PCs, %d edges\n", dir, len(files), len(pcs), len(edges))
	if opt.Lines != nil {
		reportLines(w, pcs, opt)
	}
	if syms == nil {
		fmt.Fprintf(w, "  no symbols (the corpus has no kallsyms; pass --system-map): %d PCs, not attributed to functions\n", len(pcs))
		return nil
	}
	fmt.Fprintf(w, "  symbols: %s\n", from)
	byFn := map[string]*fnCov{}
	for pc := range pcs {
		fn, ok := syms.Func(pc)
		if !ok {
			fn = "?"
		}
		f := byFn[fn]
		if f == nil {
			f = &fnCov{name: fn, file: ForkMMFile(fn)}
			byFn[fn] = f
		}
		f.pcs++
	}
	otherFns := reportFiles(w, byFn)
	reportFuncs(w, byFn, opt.All)
	if !opt.All {
		fmt.Fprintf(w, "  (%d functions outside fork/mm not listed: --all)\n", otherFns)
	}
	return nil
}

// readCoverage reads the coverage files of a corpus: the PCs and edges
// of all of them.
func readCoverage(files []string) (map[uint64]struct{}, map[uint32]struct{}, error) {
	pcs := map[uint64]struct{}{}
	edges := map[uint32]struct{}{}
	for _, f := range files {
		b, err := fsutil.ReadFileLimited(f, maxCoverFile)
		if err != nil {
			return nil, nil, err
		}
		var c obs.Coverage
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, pc := range c.PCs {
			pcs[pc] = struct{}{}
		}
		for _, e := range c.Edges {
			edges[e] = struct{}{}
		}
	}
	return pcs, edges, nil
}

// fnCov is a covered function: its fork/mm file ("" for other code) and
// its PCs.
type fnCov struct {
	name, file string
	pcs        int
}

// reportFiles writes the coverage of fork/mm by file, most PCs first,
// and returns the number of functions outside fork/mm.
func reportFiles(w io.Writer, byFn map[string]*fnCov) (otherFns int) {
	type fileCov struct {
		file     string
		fns, pcs int
	}
	byFile := map[string]*fileCov{}
	otherPCs := 0
	for _, f := range byFn {
		if f.file == "" {
			otherPCs += f.pcs
			otherFns++
			continue
		}
		fc := byFile[f.file]
		if fc == nil {
			fc = &fileCov{file: f.file}
			byFile[f.file] = fc
		}
		fc.fns++
		fc.pcs += f.pcs
	}
	var files []*fileCov
	mmPCs, mmFns := 0, 0
	for _, fc := range byFile {
		files = append(files, fc)
		mmPCs += fc.pcs
		mmFns += fc.fns
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].pcs != files[j].pcs {
			return files[i].pcs > files[j].pcs
		}
		return files[i].file < files[j].file
	})
	fmt.Fprintf(w, "  fork/mm (kernel/fork.c, mm/*.c): %d PCs in %d functions; other kernel code: %d PCs in %d functions\n", mmPCs, mmFns, otherPCs, otherFns)
	for _, fc := range files {
		fmt.Fprintf(w, "    %-28s %4d/%-4d functions %6d PCs\n", fc.file, fc.fns, FileFuncs(fc.file), fc.pcs)
	}
	return otherFns
}

// reportFuncs lists the covered functions by file (those outside fork/mm
// only with all).
func reportFuncs(w io.Writer, byFn map[string]*fnCov, all bool) {
	var fns []*fnCov
	for _, f := range byFn {
		fns = append(fns, f)
	}
	sort.Slice(fns, func(i, j int) bool {
		if fns[i].file != fns[j].file {
			return fns[i].file < fns[j].file
		}
		if fns[i].pcs != fns[j].pcs {
			return fns[i].pcs > fns[j].pcs
		}
		return fns[i].name < fns[j].name
	})
	fmt.Fprintln(w, "  covered functions (file, function, PCs):")
	for _, f := range fns {
		if f.file == "" && !all {
			continue
		}
		file := f.file
		if file == "" {
			file = "-"
		}
		fmt.Fprintf(w, "    %-28s %-40s %5d\n", file, f.name, f.pcs)
	}
}

// reportLines writes the covered source lines per file: with the
// vmlinux's line tables, each PC's call line; per file, how many of the
// lines that have code (in the table) were reached.
func reportLines(w io.Writer, pcs map[uint64]struct{}, opt ReportOptions) {
	covered := map[string]map[int]bool{}
	missed := 0
	for pc := range pcs {
		file, line, ok := opt.Lines.CallLine(pc)
		if !ok {
			missed++
			continue
		}
		if !opt.All && !ForkMMUnit(file) {
			continue
		}
		if covered[file] == nil {
			covered[file] = map[int]bool{}
		}
		covered[file][line] = true
	}
	withCode := opt.Lines.FileLines()
	var files []string
	total := 0
	for f, ls := range covered {
		files = append(files, f)
		total += len(ls)
	}
	sort.Slice(files, func(i, j int) bool {
		if len(covered[files[i]]) != len(covered[files[j]]) {
			return len(covered[files[i]]) > len(covered[files[j]])
		}
		return files[i] < files[j]
	})
	scope := "kernel/fork.c and mm/*.c"
	if opt.All {
		scope = "all files"
	}
	where := "outside the line tables"
	if opt.Lines.Units < opt.Lines.Total {
		where = "in compile units not loaded (--all loads every unit) or outside the line tables"
	}
	fmt.Fprintf(w, "  lines (%s, %d of %d compile units): %s: %d lines covered in %d files; %d PCs %s\n",
		opt.LinesFrom, opt.Lines.Units, opt.Lines.Total, scope, total, len(files), missed, where)
	for _, f := range files {
		fmt.Fprintf(w, "    %-28s %5d/%-5d lines with code\n", f, len(covered[f]), withCode[f])
	}
	if !opt.ListLines {
		return
	}
	fmt.Fprintln(w, "  covered lines (file:line):")
	sort.Strings(files)
	for _, f := range files {
		var ls []int
		for l := range covered[f] {
			ls = append(ls, l)
		}
		sort.Ints(ls)
		for _, l := range ls {
			fmt.Fprintf(w, "    %s:%d\n", f, l)
		}
	}
}
