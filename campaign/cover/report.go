package cover

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// ReportOptions tune Report.
type ReportOptions struct {
	// Symbols replaces the corpus's own kallsyms (e.g. a System.map).
	Symbols     *Symbols
	SymbolsFrom string
	// All lists every covered function, not only fork/mm ones.
	All bool
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
	pcs := map[uint64]struct{}{}
	edges := map[uint32]struct{}{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var c obs.Coverage
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, pc := range c.PCs {
			pcs[pc] = struct{}{}
		}
		for _, e := range c.Edges {
			edges[e] = struct{}{}
		}
	}
	syms, from := opt.Symbols, opt.SymbolsFrom
	if syms == nil {
		if s, err := LoadSymbols(filepath.Join(dir, "kallsyms")); err == nil {
			syms, from = s, "kallsyms of the guest kernel"
		}
	}
	fmt.Fprintf(w, "%s: %d programs, %d PCs, %d edges\n", dir, len(files), len(pcs), len(edges))
	if syms == nil {
		fmt.Fprintf(w, "  no symbols (the corpus has no kallsyms; pass --system-map): %d PCs, not attributed to functions\n", len(pcs))
		return nil
	}
	fmt.Fprintf(w, "  symbols: %s\n", from)
	type fnCov struct {
		name, file string
		pcs        int
	}
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
	type fileCov struct {
		file     string
		fns, pcs int
	}
	byFile := map[string]*fileCov{}
	var fns []*fnCov
	otherPCs, otherFns := 0, 0
	for _, f := range byFn {
		fns = append(fns, f)
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
	var files2 []*fileCov
	mmPCs, mmFns := 0, 0
	for _, fc := range byFile {
		files2 = append(files2, fc)
		mmPCs += fc.pcs
		mmFns += fc.fns
	}
	sort.Slice(files2, func(i, j int) bool {
		if files2[i].pcs != files2[j].pcs {
			return files2[i].pcs > files2[j].pcs
		}
		return files2[i].file < files2[j].file
	})
	fmt.Fprintf(w, "  fork/mm (kernel/fork.c, mm/*.c): %d PCs in %d functions; other kernel code: %d PCs in %d functions\n", mmPCs, mmFns, otherPCs, otherFns)
	for _, fc := range files2 {
		fmt.Fprintf(w, "    %-28s %4d/%-4d functions %6d PCs\n", fc.file, fc.fns, FileFuncs(fc.file), fc.pcs)
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
		if f.file == "" && !opt.All {
			continue
		}
		file := f.file
		if file == "" {
			file = "-"
		}
		fmt.Fprintf(w, "    %-28s %-40s %5d\n", file, f.name, f.pcs)
	}
	if !opt.All {
		fmt.Fprintf(w, "  (%d functions outside fork/mm not listed: --all)\n", otherFns)
	}
	return nil
}
