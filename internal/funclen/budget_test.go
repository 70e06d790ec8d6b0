package funclen

import (
	"os"
	"path/filepath"
	"testing"
)

// The function-length budget of issue 30 §4: at most maxLong functions
// over longLines lines in the module's non-test files, none over
// maxLines. (When it was set: 40 over 100 lines, 11 over 150; `go run
// ./tools/funclen` lists them.)
const (
	longLines = 100
	maxLong   = 10
	maxLines  = 150
)

// overMax are functions allowed over maxLines, by name, and why (none
// since machine.forkMeasured was split).
var overMax = map[string]string{}

func TestBudget(t *testing.T) {
	root := moduleRoot(t)
	funcs, err := Measure(root, longLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range funcs {
		t.Logf("%4d %s:%d %s", f.Lines, f.File, f.Line, f.Name)
		if f.Lines > maxLines {
			if _, ok := overMax[f.Name]; !ok {
				t.Errorf("%s:%d %s: %d lines, more than %d: split it", f.File, f.Line, f.Name, f.Lines, maxLines)
			}
		}
	}
	if len(funcs) > maxLong {
		t.Errorf("%d functions over %d lines, the budget is %d: split one (go run ./tools/funclen lists them)", len(funcs), longLines, maxLong)
	}
}

// moduleRoot is the directory of the module's go.mod, above this one.
func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = up
	}
}
