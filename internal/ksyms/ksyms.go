// Package ksyms reads kernel text symbols (/proc/kallsyms, System.map)
// and maps addresses to functions: the one symbolizer of the project, on
// the lowest floor so that the executor (which names the functions that
// filled a KCOV buffer), the coverage tracker and the tests share it.
package ksyms

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// Symbols maps kernel addresses to function names.
type Symbols struct {
	addrs []uint64
	names []string
}

// Parse reads /proc/kallsyms or System.map text ("ADDR TYPE NAME" lines);
// only text symbols (t, T, w, W) are kept. name says where the text came
// from, for errors.
func Parse(name string, r io.Reader) (*Symbols, error) {
	type sym struct {
		a uint64
		n string
	}
	var syms []sym
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		switch f[1] {
		case "t", "T", "w", "W":
		default:
			continue
		}
		a, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: address %q: not hex", name, line, f[0])
		}
		if a == 0 {
			continue
		}
		syms = append(syms, sym{a, f[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(syms) == 0 {
		return nil, fmt.Errorf("%s: no text symbols (addresses hidden? read it as root)", name)
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].a < syms[j].a })
	s := &Symbols{}
	for _, x := range syms {
		s.addrs = append(s.addrs, x.a)
		s.names = append(s.names, x.n)
	}
	return s, nil
}

// MaxFile bounds a symbol file (a distribution kernel's System.map is
// about 10 MB).
const MaxFile = 256 << 20

// Load reads a symbol file (kallsyms or System.map).
func Load(path string) (*Symbols, error) {
	if path == "/proc/kallsyms" {
		// A proc file: not regular, its size unknown until read.
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return Parse(path, io.LimitReader(f, MaxFile))
	}
	b, err := fsutil.ReadFileLimited(path, MaxFile)
	if err != nil {
		return nil, err
	}
	return Parse(path, strings.NewReader(string(b)))
}

// Func returns the function containing pc.
func (s *Symbols) Func(pc uint64) (string, bool) {
	if s == nil {
		return "", false
	}
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > pc }) - 1
	if i < 0 {
		return "", false
	}
	return s.names[i], true
}

// Range returns the addresses of fn: its first symbol's address and the
// next symbol's (ok false when fn is not there).
func (s *Symbols) Range(fn string) (lo, hi uint64, ok bool) {
	if s == nil {
		return 0, 0, false
	}
	for i, n := range s.names {
		if n == fn {
			if i+1 < len(s.addrs) {
				return s.addrs[i], s.addrs[i+1], true
			}
			return s.addrs[i], ^uint64(0), true
		}
	}
	return 0, 0, false
}

// HotSpot names the functions most of pcs lie in, at most top of them,
// with their shares: "__handle_mm_fault 19%, mtree_range_walk 9%" ("":
// no symbols or no pcs).
func (s *Symbols) HotSpot(pcs []uint64, top int) string {
	if s == nil || len(s.addrs) == 0 || len(pcs) == 0 {
		return ""
	}
	count := map[int]int{}
	for _, pc := range pcs {
		j := sort.Search(len(s.addrs), func(j int) bool { return s.addrs[j] > pc }) - 1
		count[j]++
	}
	type fn struct{ j, n int }
	var fns []fn
	for j, n := range count {
		fns = append(fns, fn{j, n})
	}
	sort.Slice(fns, func(x, y int) bool { return fns[x].n > fns[y].n || fns[x].n == fns[y].n && fns[x].j < fns[y].j })
	var out []string
	for _, f := range fns[:min(top, len(fns))] {
		name := "?"
		if f.j >= 0 {
			name = s.names[f.j]
		}
		out = append(out, fmt.Sprintf("%s %d%%", name, 100*f.n/len(pcs)))
	}
	return strings.Join(out, ", ")
}
