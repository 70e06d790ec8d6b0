// Command funclen lists the Go functions (non-test files) of more than -min
// lines under a directory, longest first, and their count:
//
//	go run ./tools/funclen [-min 100] [dir]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/forkfuzz/forkfuzz/internal/funclen"
)

func main() {
	min := flag.Int("min", 100, "list functions of more than this many lines")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	funcs, err := funclen.Measure(root, *min)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(1)
	}
	for _, f := range funcs {
		fmt.Printf("%4d %s:%d %s\n", f.Lines, f.File, f.Line, f.Name)
	}
	fmt.Printf("%d functions over %d lines\n", len(funcs), *min)
}
