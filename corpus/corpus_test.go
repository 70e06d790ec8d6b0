package corpus

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func parse(t *testing.T, text string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const progA = "forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0\nfork f0\nwait f0\n"
const progB = "forkfuzz v1\nregion r0 memfd-private pages=1\npwrite r0 off=0x8\n"

func TestDirAddLoad(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "new", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := parse(t, progA), parse(t, progB)
	name, added, err := d.Add(a)
	if err != nil || !added {
		t.Fatalf("Add: %v %v", added, err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}\.ffz$`).MatchString(name) || name != Name(a) {
		t.Fatalf("name %q", name)
	}
	text, err := os.ReadFile(filepath.Join(d.Path(), name))
	if err != nil || !bytes.Equal(text, a.Format()) {
		t.Fatalf("file holds %q, %v", text, err)
	}
	// The same program again, even written differently, is a duplicate.
	again := parse(t, "forkfuzz v1\n# comment\nregion r0 anon-private pages=4 thp=default\nstore r0 off=0 count=1\nfork f0\nwait f0\n")
	if name2, added, err := d.Add(again); err != nil || added || name2 != name {
		t.Fatalf("duplicate Add: %q %v %v", name2, added, err)
	}
	if _, added, err := d.Add(b); err != nil || !added {
		t.Fatalf("Add b: %v %v", added, err)
	}
	if !d.Has(a) || !d.Has(b) || d.Has(parse(t, progA+"check\n")) {
		t.Fatal("Has is wrong")
	}
	// Other files are ignored.
	os.WriteFile(filepath.Join(d.Path(), "notes.txt"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(d.Path(), ".tmp-123"), []byte("partial"), 0o644)
	os.Mkdir(filepath.Join(d.Path(), "sub.ffz"), 0o755)
	entries, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("loaded %d entries", len(entries))
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = string(e.Prog.Format())
	}
	if got[Name(a)] != string(a.Format()) || got[Name(b)] != string(b.Format()) {
		t.Fatalf("loaded %v", got)
	}
}

func TestDirAddInvalid(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bad := &prog.Program{Regions: []prog.Region{{Kind: prog.AnonPrivate, Pages: 1}}, Ops: []prog.Op{{Kind: prog.OpFork}}}
	if _, _, err := d.Add(bad); err == nil {
		t.Fatal("added an invalid program")
	}
	if names, _ := d.Names(); len(names) != 0 {
		t.Fatalf("files left: %v", names)
	}
}

func TestLoadBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // the error must start with the file path then this
	}{
		{"syntax", "forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0 colour=red\n", ":3:18: unknown argument"},
		{"validation", "# c\nforkfuzz v1\n\nregion r0 anon-private pages=4\ncheck # fine\npwrite r0 off=0x0\n", ":6: op 1: pwrite needs a memfd region"},
		{"whole program", "forkfuzz v1\nregion r0 anon-private pages=4\nfork f0\n", ": fork f0 is never waited for"},
		{"header", "", ":1:1: empty program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := d.Add(parse(t, progA)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(d.Path(), "bad.ffz")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			entries, err := d.Load()
			if len(entries) != 1 {
				t.Fatalf("%d good entries, want 1", len(entries))
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.File != path {
				t.Fatalf("error %v does not name %s", err, path)
			}
			if !strings.HasPrefix(err.Error(), path+tc.want) {
				t.Fatalf("got %q, want %q", err, path+tc.want)
			}
		})
	}
}

func TestOpLine(t *testing.T) {
	text := []byte("# x\n\nforkfuzz v1 # y\nregion r0 anon-private pages=1\n  # z\ncheck\n\nregion r1 anon-private pages=1\nfork f0\n")
	for i, want := range []int{6, 9, 0} {
		if got := opLine(text, i); got != want {
			t.Errorf("opLine(%d) = %d, want %d", i, got, want)
		}
	}
}

// A resume corpus with a huge file, a FIFO or a link to /dev/zero among
// its programs loads the rest at once: the huge file is an error naming
// it, the others are no program files.
func TestLoadBounded(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Add(parse(t, progA)); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(d.Path(), "huge.ffz")
	if err := os.WriteFile(huge, []byte(progB), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, MaxFileSize+1<<20); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d.Path(), "fifo.ffz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(d.Path(), "zero.ffz")); err != nil {
		t.Fatal(err)
	}
	entries, err := d.Load()
	if len(entries) != 1 || err == nil || !strings.Contains(err.Error(), "huge.ffz is 17 MiB, larger than the 16 MiB limit") {
		t.Fatalf("%d entries, err %v", len(entries), err)
	}
}
