package corpus

import (
	"errors"
	"strings"
	"testing"
)

const twoPrograms = `# first
forkfuzz v1
region r0 anon-private pages=4 thp=off
fork f0 fail_nth=3
wait f0
# site f0 fail_nth: *
====
forkfuzz v1
region r0 anon-private pages=4 thp=off
store r0 off=0x0 count=1 stride=0x8
`

func TestFilePrograms(t *testing.T) {
	ps, err := FilePrograms("two.ffz", []byte(twoPrograms))
	if err != nil || len(ps) != 2 || ps[0].N != 1 || ps[1].N != 2 || len(ps[0].Sites) != 1 || len(ps[1].Sites) != 0 {
		t.Fatalf("FilePrograms: %d programs, %v", len(ps), err)
	}
	for _, tc := range []struct {
		n    int
		want string // "" for no error
		ops  int
	}{
		{0, "two.ffz holds 2 programs", 0},
		{1, "", 2},
		{2, "", 1},
		{3, "two.ffz#3: the file holds 2 program(s)", 0},
	} {
		fp, err := Pick("two.ffz", ps, tc.n)
		switch {
		case tc.want == "" && (err != nil || len(fp.Prog.Ops) != tc.ops):
			t.Errorf("Pick %d: %v, %+v", tc.n, err, fp)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Pick %d: %v, want %q", tc.n, err, tc.want)
		}
	}
	// An error names the file's line, and the programs keep their numbers.
	bad := strings.Replace(twoPrograms, "fork f0 fail_nth=3", "fork f0 colour=3", 1)
	ps, err = FilePrograms("bad.ffz", []byte(bad))
	var fe *FileError
	if !errors.As(err, &fe) || fe.Line != 4 || len(ps) != 1 || ps[0].N != 2 {
		t.Fatalf("bad first program: %v (%d programs)", err, len(ps))
	}
}

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		arg, file string
		n         int
	}{
		{"a.ffz", "a.ffz", 0}, {"a.ffz#2", "a.ffz", 2}, {"dir/a#b.ffz", "dir/a#b.ffz", 0}, {"a.ffz#0", "a.ffz#0", 0}, {"a.ffz#x", "a.ffz#x", 0},
	} {
		if f, n := SplitName(tc.arg); f != tc.file || n != tc.n {
			t.Errorf("SplitName(%q) = %q, %d; want %q, %d", tc.arg, f, n, tc.file, tc.n)
		}
	}
}

// FuzzFilePrograms: any text gives programs or an error, never a panic,
// and every program's number is its place in the file.
func FuzzFilePrograms(f *testing.F) {
	f.Add([]byte(twoPrograms))
	f.Add([]byte("====\n====\n"))
	f.Add([]byte("forkfuzz v1\n====\nforkfuzz v1\nregion r0 anon-private pages=1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, _ := FilePrograms("f.ffz", b)
		last := 0
		for _, p := range ps {
			if p.N <= last || p.Prog == nil {
				t.Fatalf("program numbers %d after %d", p.N, last)
			}
			last = p.N
		}
	})
}
