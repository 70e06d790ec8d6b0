// Command mkcow writes cow.c's expressible cases as program files into
// corpus/cow and the matrix of cases into docs/cow.md (between its
// "generated: cases" markers). go generate ./corpus/cow runs it from
// corpus/cow; -dir and -doc override the paths.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forkfuzz/forkfuzz/corpus/cow"
)

func main() {
	dir := flag.String("dir", ".", "directory of the program files (corpus/cow)")
	doc := flag.String("doc", "../../docs/cow.md", "the page whose generated section to rewrite")
	flag.Parse()
	if err := run(*dir, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "mkcow:", err)
		os.Exit(1)
	}
}

func run(dir, doc string) error {
	files := cow.Files()
	old, err := filepath.Glob(filepath.Join(dir, "*.ffz"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, ok := files[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			return err
		}
	}
	page, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	page, err = cow.ReplaceSection(page, "cases", cow.CasesSection())
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if err := os.WriteFile(doc, page, 0o644); err != nil {
		return err
	}
	fmt.Printf("mkcow: %d programs in %s, the matrix in %s\n", len(files), strings.TrimSuffix(dir, "/"), doc)
	return nil
}
