package corpus

import (
	"embed"
	"io/fs"
	"slices"
)

//go:embed seeds/*.ffz
var seedFS embed.FS

// Seeds returns the embedded seed programs, sorted by file name. It
// panics if a seed does not parse: they are part of the build, and the
// package tests parse every one.
func Seeds() []Entry {
	names, err := fs.Glob(seedFS, "seeds/*"+Ext)
	if err != nil {
		panic(err)
	}
	slices.Sort(names)
	entries := make([]Entry, 0, len(names))
	for _, path := range names {
		text, err := seedFS.ReadFile(path)
		if err != nil {
			panic(err)
		}
		p, err := ParseFile(path, text)
		if err != nil {
			panic(err)
		}
		entries = append(entries, Entry{Name: path[len("seeds/"):], Prog: p})
	}
	return entries
}

// SeedText returns the text of the embedded seed file name (as in
// Entry.Name), comments included.
func SeedText(name string) ([]byte, error) {
	return seedFS.ReadFile("seeds/" + name)
}
