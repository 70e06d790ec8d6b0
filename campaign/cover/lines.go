package cover

// Line-level coverage: KCOV PCs mapped to source lines with the DWARF line
// tables of the kernel's vmlinux (built with CONFIG_DEBUG_INFO_*; `forkfuzz
// kernel build --debug-info` keeps one beside the image). The guest boots
// with nokaslr, so a KCOV PC is a vmlinux address. KCOV records the return
// address of its __sanitizer_cov_trace_pc call; the line is the call's,
// so PC-1 is looked up (as syzkaller and addr2line users do).

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
)

// Lines maps addresses to source lines for the compile units a filter
// kept.
type Lines struct {
	rows []lineRow // by address
	// Units is how many compile units the table holds, of Total.
	Units, Total int
}

type lineRow struct {
	addr, end uint64 // [addr, end) maps to file:line
	file      string
	line      int
}

// ErrNoDWARF says the ELF file has no line tables (a vmlinux built without
// CONFIG_DEBUG_INFO).
var ErrNoDWARF = errors.New("no DWARF line tables (build the kernel with CONFIG_DEBUG_INFO_DWARF5 or DWARF4: forkfuzz kernel build --debug-info)")

// LoadLines reads the DWARF line tables of the ELF file at path, keeping
// the compile units whose file name keep accepts (relative to the build's
// source tree, e.g. "mm/memory.c"; nil keeps all).
func LoadLines(path string, keep func(unit string) bool) (*Lines, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Section(".debug_line") == nil || f.Section(".debug_info") == nil {
		return nil, fmt.Errorf("%s: %w", path, ErrNoDWARF)
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l := &Lines{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: reading DWARF: %w", path, err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		r.SkipChildren()
		l.Total++
		name, _ := e.Val(dwarf.AttrName).(string)
		compDir, _ := e.Val(dwarf.AttrCompDir).(string)
		unit := relUnit(name, compDir)
		if keep != nil && !keep(unit) {
			continue
		}
		lr, err := d.LineReader(e)
		if err != nil {
			return nil, fmt.Errorf("%s: line table of %s: %w", path, unit, err)
		}
		if lr == nil {
			continue
		}
		l.Units++
		if err := l.addUnit(lr, compDir); err != nil {
			return nil, fmt.Errorf("%s: line table of %s: %w", path, unit, err)
		}
	}
	if l.Total == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoDWARF)
	}
	sort.SliceStable(l.rows, func(i, j int) bool { return l.rows[i].addr < l.rows[j].addr })
	return l, nil
}

// addUnit turns a unit's line program into address ranges: each row
// covers the addresses up to the next row of its sequence.
func (l *Lines) addUnit(lr *dwarf.LineReader, compDir string) error {
	var prev *dwarf.LineEntry
	for {
		var e dwarf.LineEntry
		if err := lr.Next(&e); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if prev != nil && e.Address > prev.Address && prev.File != nil && prev.Line > 0 {
			l.rows = append(l.rows, lineRow{addr: prev.Address, end: e.Address, file: relUnit(prev.File.Name, compDir), line: prev.Line})
		}
		if e.EndSequence {
			prev = nil
			continue
		}
		ec := e
		prev = &ec
	}
}

// Line returns the source line of the instruction at addr.
func (l *Lines) Line(addr uint64) (file string, line int, ok bool) {
	i := sort.Search(len(l.rows), func(i int) bool { return l.rows[i].addr > addr }) - 1
	// Rows of different units may overlap (inlined code is described in
	// its caller's unit only, but be safe): look back over rows that
	// start at the same address.
	for ; i >= 0 && i < len(l.rows); i-- {
		r := l.rows[i]
		if addr >= r.addr && addr < r.end {
			return r.file, r.line, true
		}
		if i > 0 && l.rows[i-1].addr != r.addr {
			break
		}
	}
	return "", 0, false
}

// CallLine is Line for a KCOV PC (the return address of the coverage
// call): the line of the call instruction before it.
func (l *Lines) CallLine(pc uint64) (file string, line int, ok bool) {
	if pc == 0 {
		return "", 0, false
	}
	return l.Line(pc - 1)
}

// relUnit makes a DWARF file name relative to the build's source tree:
// kernel builds name files relative to the tree or, with O=, by absolute
// path under it; "../mm/memory.c" and "/src/linux/mm/memory.c" both
// become "mm/memory.c" when a known top-level directory is in the path.
func relUnit(name, compDir string) string {
	name = filepath.ToSlash(name)
	for _, top := range kernelTopDirs {
		if i := strings.LastIndex(name, "/"+top+"/"); i >= 0 {
			return name[i+1:]
		}
		if strings.HasPrefix(name, top+"/") {
			return name
		}
	}
	if !filepath.IsAbs(name) && compDir != "" {
		return filepath.ToSlash(filepath.Clean(filepath.Join(compDir, name)))
	}
	return filepath.ToSlash(filepath.Clean(name))
}

var kernelTopDirs = []string{"mm", "kernel", "arch", "fs", "include", "lib", "drivers", "block", "net", "security", "ipc", "init", "virt", "crypto", "io_uring"}

// ForkMMUnit reports whether a source file is one of the fork paths the
// coverage report focuses on (kernel/fork.c, mm/*.c).
func ForkMMUnit(unit string) bool {
	return unit == "kernel/fork.c" || (strings.HasPrefix(unit, "mm/") && strings.HasSuffix(unit, ".c") && !strings.Contains(unit[3:], "/"))
}

// FileLines counts, per source file, the distinct lines that have code in
// the table (the most a campaign could cover there).
func (l *Lines) FileLines() map[string]int {
	seen := map[string]map[int]bool{}
	for _, r := range l.rows {
		if seen[r.file] == nil {
			seen[r.file] = map[int]bool{}
		}
		seen[r.file][r.line] = true
	}
	n := map[string]int{}
	for f, ls := range seen {
		n[f] = len(ls)
	}
	return n
}
