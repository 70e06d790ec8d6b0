package oracle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoOracleLiterals: an oracle is named by the table's constants, never
// written as a string elsewhere (the gate once listed the event oracles
// by hand, assembled "kernel-"+kind and matched prefixes). It scans every
// non-test Go file of the module for: a string literal that is an event
// oracle's name or the "kernel-"/"executor-" prefix; `Oracle: "..."` in a
// composite literal; a conversion of a literal to an oracle type.
func TestNoOracleLiterals(t *testing.T) {
	root := filepath.Join("..", "..")
	events := map[string]bool{"kernel-": true, "executor-": true}
	for _, n := range Events() {
		events[string(n)] = true
	}
	all := map[string]bool{}
	for _, in := range Table {
		all[string(in.Name)] = true
	}
	var bad []string
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") && path != root || path == filepath.Join(root, "internal", "oracle") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		n++
		lit := func(e ast.Expr) (string, bool) {
			bl, ok := e.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(bl.Value)
			return s, err == nil
		}
		report := func(pos token.Pos, what string) {
			bad = append(bad, fset.Position(pos).String()+": "+what)
		}
		ast.Inspect(f, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.BasicLit:
				if s, ok := lit(x); ok && events[s] {
					report(x.Pos(), strconv.Quote(s)+": an event oracle written as a string")
				}
			case *ast.KeyValueExpr:
				if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Oracle" {
					if s, ok := lit(x.Value); ok {
						report(x.Pos(), "Oracle: "+strconv.Quote(s)+": use the table's constant")
					}
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && len(x.Args) == 1 && (sel.Sel.Name == "Oracle" || sel.Sel.Name == "Name") {
					if s, ok := lit(x.Args[0]); ok && all[s] {
						report(x.Pos(), "a conversion of "+strconv.Quote(s)+" to an oracle: use the table's constant")
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("scanned only %d files: the walk is broken", n)
	}
	for _, b := range bad {
		t.Error(b)
	}
}
