package cover

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

const linesC = `#include <stdlib.h>
static int table[64];

__attribute__((noinline)) int copy_range(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++) {
		if (table[i & 63] > 3)
			s += table[i & 63];
		else
			table[i & 63]++;
	}
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	return copy_range(n) & 1;
}
`

// TestLoadLines compares the line tables' answers with addr2line's for
// every instruction address of a program gcc built with -g.
func TestLoadLines(t *testing.T) {
	for _, tool := range []string{"gcc", "addr2line"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing under CI", tool)
			}
			t.Skipf("%s not installed: no DWARF test binary to read", tool)
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "lines.c")
	bin := filepath.Join(dir, "lines")
	if err := os.WriteFile(src, []byte(linesC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-g", "-O1", "-no-pie", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	l, err := LoadLines(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Units < 1 || len(l.rows) == 0 {
		t.Fatalf("units %d of %d, %d rows", l.Units, l.Total, len(l.rows))
	}
	addrs := funcAddrs(t, bin, "copy_range", "main")
	if len(addrs) < 20 {
		t.Fatalf("%d addresses in copy_range and main", len(addrs))
	}
	want, lines := compareAddr2line(t, bin, l, addrs)
	// The loop's branches are on lines of their own: the table must tell
	// them apart, not give one line per function.
	if len(lines) < 6 {
		t.Errorf("only lines %v seen", lines)
	}
	if _, _, ok := l.CallLine(0); ok {
		t.Error("PC 0 has a line")
	}
	t.Logf("%d addresses checked against addr2line, %d distinct lines; file lines %v", len(addrs), len(lines), l.FileLines()[filepath.ToSlash(src)])

	// The report: a corpus whose PCs are return addresses (one past an
	// instruction of copy_range) lists the lines addr2line names.
	work := t.TempDir()
	tr, err := Open(work, "k1", false, "")
	if err != nil {
		t.Fatal(err)
	}
	var pcs []uint64
	wantLines := map[string]bool{}
	for i, a := range addrs[:len(addrs)/2] {
		w, _, _ := strings.Cut(want[i], " ")
		if _, n, _ := strings.Cut(w, ":"); n != "0" && n != "?" {
			pcs = append(pcs, a+1)
			wantLines[filepath.Base(strings.Split(w, ":")[0])+":"+n] = true
		}
	}
	p := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1\nfork f0\nwait f0\n")
	if _, err := tr.Add(p, &obs.Coverage{PCs: pcs, Edges: []uint32{1}}); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	var rep bytes.Buffer
	if err := Report(&rep, work, ReportOptions{Lines: l, LinesFrom: bin, All: true, ListLines: true}); err != nil {
		t.Fatal(err)
	}
	for wl := range wantLines {
		if !strings.Contains(rep.String(), "/"+wl+"\n") {
			t.Errorf("report lacks %s:\n%s", wl, rep.String())
		}
	}
	if !strings.Contains(rep.String(), "lines covered in") {
		t.Errorf("report has no line summary:\n%s", rep.String())
	}
}

func TestLoadLinesNoDWARF(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "x.c"), filepath.Join(dir, "x")
	os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644)
	if out, err := exec.Command("gcc", "-g0", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if _, err := LoadLines(bin, nil); !errors.Is(err, ErrNoDWARF) || !strings.Contains(err.Error(), "--debug-info") {
		t.Fatalf("got %v, want ErrNoDWARF naming the fix", err)
	}
	if _, err := LoadLines(src, nil); err == nil {
		t.Fatal("a C source file read as ELF")
	}
}

func TestRelUnit(t *testing.T) {
	for _, tc := range []struct{ name, dir, want string }{
		{"mm/memory.c", "/build/linux", "mm/memory.c"},
		{"../mm/memory.c", "/src/linux/out", "mm/memory.c"},
		{"/usr/src/linux-6.1/kernel/fork.c", "", "kernel/fork.c"},
		{"/usr/src/linux-6.1/include/linux/mm.h", "", "include/linux/mm.h"},
		{"t.c", "/tmp/x", "/tmp/x/t.c"},
	} {
		if got := relUnit(tc.name, tc.dir); got != tc.want {
			t.Errorf("relUnit(%q, %q) = %q, want %q", tc.name, tc.dir, got, tc.want)
		}
	}
	for unit, want := range map[string]bool{"mm/memory.c": true, "kernel/fork.c": true, "mm/kasan/common.c": false, "include/linux/mm.h": false, "kernel/exit.c": false} {
		if ForkMMUnit(unit) != want {
			t.Errorf("ForkMMUnit(%q) = %v", unit, !want)
		}
	}
}

// compareAddr2line checks l.Line against addr2line for every address and
// returns addr2line's answers and the distinct lines seen.
func compareAddr2line(t *testing.T, bin string, l *Lines, addrs []uint64) ([]string, map[int]bool) {
	t.Helper()
	var in bytes.Buffer
	for _, a := range addrs {
		fmt.Fprintf(&in, "%#x\n", a)
	}
	cmd := exec.Command("addr2line", "-e", bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(want) != len(addrs) {
		t.Fatalf("addr2line gave %d lines for %d addresses", len(want), len(addrs))
	}
	lines := map[int]bool{}
	for i, a := range addrs {
		w, _, _ := strings.Cut(want[i], " ")
		wfile, wline, _ := strings.Cut(w, ":")
		n, _ := strconv.Atoi(wline)
		file, line, ok := l.Line(a)
		if n == 0 {
			continue // addr2line did not know either
		}
		if !ok || !strings.HasSuffix(filepath.ToSlash(wfile), "/"+file) && filepath.Base(file) != filepath.Base(wfile) || line != n {
			t.Errorf("%#x: got %s:%d (%v), addr2line says %s", a, file, line, ok, want[i])
		}
		lines[line] = true
	}
	return want, lines
}

// TestLoadLinesVmlinux checks a kernel's line tables (FORKFUZZ_TEST_VMLINUX:
// a vmlinux from forkfuzz kernel build --debug-info) against addr2line over
// every instruction address of dup_mmap and copy_pte_range's neighbours.
func TestLoadLinesVmlinux(t *testing.T) {
	vmlinux := os.Getenv("FORKFUZZ_TEST_VMLINUX")
	if vmlinux == "" {
		t.Skip("FORKFUZZ_TEST_VMLINUX not set: no kernel with DWARF line tables here (forkfuzz kernel build --debug-info builds one)")
	}
	if _, err := exec.LookPath("addr2line"); err != nil {
		t.Skip("addr2line not installed")
	}
	l, err := LoadLines(vmlinux, ForkMMUnit)
	if err != nil {
		t.Fatal(err)
	}
	addrs := funcAddrs(t, vmlinux, "dup_mmap", "copy_page_range", "do_wp_page")
	if len(addrs) == 0 {
		t.Fatal("no dup_mmap, copy_page_range or do_wp_page in the symbol table")
	}
	_, lines := compareAddr2line(t, vmlinux, l, addrs)
	t.Logf("%d addresses, %d distinct lines, %d of %d units", len(addrs), len(lines), l.Units, l.Total)
}

// funcAddrs returns every byte address of the named functions of an ELF
// file (its symbol table).
func funcAddrs(t *testing.T, bin string, names ...string) []uint64 {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	for _, s := range syms {
		if slices.Contains(names, s.Name) {
			for a := s.Value; a < s.Value+s.Size; a++ {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs
}
