package corpus

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Separator is the line between programs of one file: a regression file
// may hold several (fork-inheritance.ffz), named FILE, FILE#2, FILE#3...
const Separator = "===="

// FileProgram is one program of a file: N (1-based), its text padded with
// comment lines so that errors name the file's line, the program and its
// site directives.
type FileProgram struct {
	N     int
	Text  []byte
	Prog  *prog.Program
	Sites []FaultSite
}

// FilePrograms parses every program of file name (text b), with its site
// directives. Errors are *FileError naming the file's line; the programs
// that parsed are returned with them.
func FilePrograms(name string, b []byte) ([]FileProgram, error) {
	var out []FileProgram
	var errs []error
	var part strings.Builder
	first, n := 1, 0
	flush := func(next int) {
		text := part.String()
		part.Reset()
		if strings.TrimSpace(text) != "" {
			padded := []byte(strings.Repeat("#\n", first-1) + text)
			n++
			p, err := ParseFile(name, padded)
			if err != nil {
				errs = append(errs, err)
			} else {
				sites, err := ParseSites(name, padded, p)
				if err != nil {
					errs = append(errs, err)
				}
				out = append(out, FileProgram{N: n, Text: padded, Prog: p, Sites: sites})
			}
		}
		first = next
	}
	for i, l := range strings.SplitAfter(string(b), "\n") {
		if strings.TrimSpace(l) == Separator {
			flush(i + 2)
			continue
		}
		part.WriteString(l)
	}
	flush(0)
	return out, errors.Join(errs...)
}

// SplitName splits "FILE#N" (the name of a file's N-th program) into the
// file and N; N is 0 for a plain file name.
func SplitName(arg string) (file string, n int) {
	i := strings.LastIndexByte(arg, '#')
	if i < 0 {
		return arg, 0
	}
	k, err := strconv.Atoi(arg[i+1:])
	if err != nil || k < 1 {
		return arg, 0
	}
	return arg[:i], k
}

// Pick is program n (1-based; 0: the file's only one) of a file's
// programs, or an error saying how to name one.
func Pick(name string, ps []FileProgram, n int) (FileProgram, error) {
	switch {
	case len(ps) == 0:
		return FileProgram{}, fmt.Errorf("%s: no program", name)
	case n == 0 && len(ps) > 1:
		return FileProgram{}, fmt.Errorf("%s holds %d programs (separated by %q lines): name one as %s#1 ... %s#%d", name, len(ps), Separator, name, name, len(ps))
	case n == 0:
		return ps[0], nil
	}
	for _, fp := range ps {
		if fp.N == n {
			return fp, nil
		}
	}
	return FileProgram{}, fmt.Errorf("%s#%d: the file holds %d program(s)", name, n, len(ps))
}
