package corpus

import (
	"embed"
	"io/fs"
	"slices"
)

// The regression programs (corpus/regress: known fork and COW bugs;
// corpus/rollback: failed forks) are part of the binary too, so that a
// gate run from a kernel tree, not from a forkfuzz checkout, replays them.
//
//go:embed regress/*.ffz rollback/*.ffz
var regressFS embed.FS

// RegressionDirs are the embedded regression directories.
var RegressionDirs = []string{"regress", "rollback"}

// RegressionFile is one embedded regression file.
type RegressionFile struct {
	Dir, Name string // "regress", "cve-2020-29374-vmsplice-cow.ffz"
	Text      []byte
}

// RegressionFiles returns the embedded files of dir ("regress" or
// "rollback"), sorted by name; nil for another dir.
func RegressionFiles(dir string) []RegressionFile {
	names, err := fs.Glob(regressFS, dir+"/*"+Ext)
	if err != nil {
		return nil
	}
	slices.Sort(names)
	var out []RegressionFile
	for _, path := range names {
		text, err := regressFS.ReadFile(path)
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		out = append(out, RegressionFile{Dir: dir, Name: path[len(dir)+1:], Text: text})
	}
	return out
}
