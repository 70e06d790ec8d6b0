// Package corpus stores forkfuzz programs on disk and ships the seed
// programs.
//
// A Dir is a directory of programs in the text format (package prog), one
// per file, named after a SHA-256 prefix of the program's canonical text
// ("<16 hex digits>.ffz"), so adding the same program twice keeps one
// file. Files are written atomically (a temporary file renamed into
// place), so several processes may add to one directory. Load reads
// every .ffz file, whatever its name, and names the file, line and column
// of anything that does not parse or validate.
//
// Seeds returns the hand-written seed programs embedded from seeds/*.ffz;
// each starts with a comment naming the fork bug class it targets.
package corpus

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// Ext is the file extension of programs.
const Ext = ".ffz"

// Entry is one stored program.
type Entry struct {
	Name string // file name, e.g. "0123456789abcdef.ffz"
	Prog *prog.Program
}

// Name returns the file name under which Dir stores p: the first 16 hex
// digits of the SHA-256 of its canonical text, plus Ext.
func Name(p *prog.Program) string {
	sum := sha256.Sum256(p.Format())
	return hex.EncodeToString(sum[:8]) + Ext
}

// Dir is a directory of programs.
type Dir struct {
	path string
}

// Open returns the corpus in directory path, creating it if needed.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	return &Dir{path: path}, nil
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

// Add stores p unless a program with the same canonical text is there
// already. It returns the file name and whether a new file was written.
// Invalid programs are refused.
func (d *Dir) Add(p *prog.Program) (name string, added bool, err error) {
	if err := p.Validate(); err != nil {
		return "", false, fmt.Errorf("corpus: refusing invalid program: %w", err)
	}
	name = Name(p)
	final := filepath.Join(d.path, name)
	if _, err := os.Stat(final); err == nil {
		return name, false, nil
	}
	tmp, err := os.CreateTemp(d.path, ".tmp-*")
	if err != nil {
		return "", false, fmt.Errorf("corpus: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	if _, err := tmp.Write(p.Format()); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("corpus: writing %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, fmt.Errorf("corpus: writing %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", false, fmt.Errorf("corpus: %w", err)
	}
	return name, true, nil
}

// Has reports whether p is stored.
func (d *Dir) Has(p *prog.Program) bool {
	_, err := os.Stat(filepath.Join(d.path, Name(p)))
	return err == nil
}

// Names returns the names of the program files, sorted.
func (d *Dir) Names() ([]string, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), Ext) && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// MaxFileSize bounds a program file that Load reads (a program of
// prog.MaxOps operations is well under 1 MiB of text; `forkfuzz exec`
// takes at most as much).
const MaxFileSize = 16 << 20

// Load reads every program file, sorted by name. Files that do not parse,
// or exceed MaxFileSize, are skipped and reported together in the error
// (a *FileError names the file and line); the good entries are returned
// either way.
func (d *Dir) Load() ([]Entry, error) {
	names, err := d.Names()
	if err != nil {
		return nil, err
	}
	var entries []Entry
	var errs []error
	for _, name := range names {
		path := filepath.Join(d.path, name)
		text, err := fsutil.ReadFileLimited(path, MaxFileSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("corpus: %w", err))
			continue
		}
		p, err := ParseFile(path, text)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, Entry{Name: name, Prog: p})
	}
	return entries, errors.Join(errs...)
}
