package checker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestComparerReadsTheModel: the comparisons (methods of *comparer) read
// the model and never assign to it (c.m.X = ..., c.m.X++, or through a
// local alias of c.m), so that judging and predicting run one model.
func TestComparerReadsTheModel(t *testing.T) {
	methods := 0
	eachMethod(t, "comparer", func(fset *token.FileSet, fd *ast.FuncDecl) {
		methods++
		aliases := map[string]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			var lhs []ast.Expr
			switch s := n.(type) {
			case *ast.AssignStmt:
				for k, l := range s.Lhs {
					if id, ok := l.(*ast.Ident); ok && k < len(s.Rhs) && isModel(s.Rhs[k], nil) {
						aliases[id.Name] = true // m := c.m
						continue
					}
					lhs = append(lhs, l)
				}
			case *ast.IncDecStmt:
				lhs = append(lhs, s.X)
			}
			for _, l := range lhs {
				if isModel(l, aliases) {
					t.Errorf("%s: comparer.%s assigns to the model", fset.Position(l.Pos()), fd.Name.Name)
				}
			}
			return true
		})
	})
	if methods < 10 {
		t.Fatalf("found %d methods of *comparer: the test no longer sees the comparisons", methods)
	}
}

// isModel: e is c.m or reaches into it (c.m.procs[i].state, m.seq with
// m an alias of c.m).
func isModel(e ast.Expr, aliases map[string]bool) bool {
	for {
		switch x := e.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "c" && x.Sel.Name == "m" {
				return true
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return aliases[x.Name]
		default:
			return false
		}
	}
}

// TestModelWritesNoFindings: the model (methods of *machine) decides what
// it expects and asks the comparer to judge; it never writes a finding
// itself (a Finding literal or a collector's add), so every finding is
// found among the comparisons.
func TestModelWritesNoFindings(t *testing.T) {
	methods := 0
	eachMethod(t, "machine", func(fset *token.FileSet, fd *ast.FuncDecl) {
		methods++
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if id, ok := x.Type.(*ast.Ident); ok && id.Name == "Finding" {
					t.Errorf("%s: machine.%s builds a Finding: move the comparison to a comparer method", fset.Position(x.Pos()), fd.Name.Name)
				}
			case *ast.SelectorExpr:
				if inner, ok := x.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "col" && x.Sel.Name == "add" {
					t.Errorf("%s: machine.%s adds a finding to the collector: move the comparison to a comparer method", fset.Position(x.Pos()), fd.Name.Name)
				}
			}
			return true
		})
	})
	if methods < 50 {
		t.Fatalf("found %d methods of *machine: the test no longer sees the model", methods)
	}
}

// eachMethod calls fn for every method of *recv in the package's
// non-test files.
func eachMethod(t *testing.T, recv string, fn func(*token.FileSet, *ast.FuncDecl)) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if id, ok := star.X.(*ast.Ident); ok && id.Name == recv {
				fn(fset, fd)
			}
		}
	}
}
