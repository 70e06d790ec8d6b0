package agents_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// capabilities are the interfaces of agents/capabilities.go, by name.
var capabilities = map[string]reflect.Type{
	"Parallel":       reflect.TypeFor[agents.Parallel](),
	"Wrapper":        reflect.TypeFor[agents.Wrapper](),
	"KernelImager":   reflect.TypeFor[agents.KernelImager](),
	"ForkImplLister": reflect.TypeFor[agents.ForkImplLister](),
	"PendingEvents":  reflect.TypeFor[agents.PendingEvents](),
	"HugetlbHost":    reflect.TypeFor[agents.HugetlbHost](),
	"FileSystemHost": reflect.TypeFor[agents.FileSystemHost](),
}

// targets are the real targets with the capabilities each claims.
var targets = []struct {
	target agents.Target
	has    []string
}{
	{(*vm.Target)(nil), []string{"Parallel", "KernelImager", "ForkImplLister", "HugetlbHost", "FileSystemHost"}},
	{(*sim.Target)(nil), nil},
	{(*agents.Native)(nil), []string{"ForkImplLister", "HugetlbHost", "FileSystemHost"}},
	{(*agents.ForkImplTarget)(nil), []string{"Parallel", "Wrapper", "PendingEvents"}},
}

// The same claims, checked by the compiler.
var (
	_ agents.Parallel       = (*vm.Target)(nil)
	_ agents.KernelImager   = (*vm.Target)(nil)
	_ agents.ForkImplLister = (*vm.Target)(nil)
	_ agents.ForkImplLister = (*agents.Native)(nil)
	_ agents.HugetlbHost    = (*vm.Target)(nil)
	_ agents.HugetlbHost    = (*agents.Native)(nil)
	_ agents.FileSystemHost = (*vm.Target)(nil)
	_ agents.FileSystemHost = (*agents.Native)(nil)
	_ agents.Parallel       = (*agents.ForkImplTarget)(nil)
	_ agents.Wrapper        = (*agents.ForkImplTarget)(nil)
	_ agents.PendingEvents  = (*agents.ForkImplTarget)(nil)
)

// TestCapabilities checks every real target against every capability
// both ways: it has what it claims, and claims what it has (a method
// added to a target that makes it a Parallel, say, changes how campaigns
// run it, and belongs in this table).
func TestCapabilities(t *testing.T) {
	for _, tg := range targets {
		typ := reflect.TypeOf(tg.target)
		for _, c := range tg.has {
			if capabilities[c] == nil {
				t.Errorf("%v claims %s, which is no capability", typ, c)
			}
		}
		for name, iface := range capabilities {
			if has, claims := typ.Implements(iface), slices.Contains(tg.has, name); has != claims {
				t.Errorf("%v: implements %s %v, claims it %v", typ, name, has, claims)
			}
		}
	}
}

// capabilityMethods are the methods of the capabilities, by name.
func capabilityMethods() map[string]string {
	m := map[string]string{}
	for name, iface := range capabilities {
		for i := range iface.NumMethod() {
			m[iface.Method(i).Name] = name
		}
	}
	return m
}

// declaredElsewhere are declarations of a capability outside
// agents/capabilities.go that their owners are to replace (package and
// type name; "" for an anonymous interface).
var declaredElsewhere = map[string]bool{}

// TestCapabilitiesDeclaredOnce checks that capabilities.go declares
// exactly the interfaces of the capabilities table, and that no other
// non-test file of the module declares one again, named or as an
// anonymous interface in a type assertion: an interface type with a
// capability's method (Unwrap returning a Target, not an error).
func TestCapabilitiesDeclaredOnce(t *testing.T) {
	root := testutil.RepoRoot(t)
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "agents", "capabilities.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if _, ok := ts.Type.(*ast.InterfaceType); ok {
				declared = append(declared, ts.Name.Name)
			}
		}
		return true
	})
	var listed []string
	for name := range capabilities {
		listed = append(listed, name)
	}
	sort.Strings(declared)
	sort.Strings(listed)
	if !slices.Equal(declared, listed) {
		t.Errorf("capabilities.go declares %v, the capabilities table lists %v", declared, listed)
	}

	methods := capabilityMethods()
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || rel == "agents/capabilities.go" {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		named := map[*ast.InterfaceType]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if it, ok := ts.Type.(*ast.InterfaceType); ok {
					named[it] = ts.Name.Name
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			it, ok := n.(*ast.InterfaceType)
			if !ok {
				return true
			}
			c := capabilityIn(it, methods)
			if c == "" {
				return true
			}
			name := named[it]
			key := pkg + " " + name
			if declaredElsewhere[key] {
				seen[key] = true
				return true
			}
			what := "an anonymous interface"
			if name != "" {
				what = "interface " + name
			}
			t.Errorf("%s:%d: %s declares capability %s again: use agents.%s", rel, fset.Position(it.Pos()).Line, what, c, c)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range declaredElsewhere {
		if !seen[key] {
			t.Errorf("%s is gone: drop it from declaredElsewhere", key)
		}
	}
}

// capabilityIn names the capability that one of its methods belongs to, or "".
func capabilityIn(it *ast.InterfaceType, methods map[string]string) string {
	for _, m := range it.Methods.List {
		ft, ok := m.Type.(*ast.FuncType)
		if !ok || len(m.Names) == 0 {
			continue
		}
		c := methods[m.Names[0].Name]
		if c == "" {
			continue
		}
		if c == "Wrapper" && !returnsTarget(ft) {
			continue // Unwrap() error: an error's chain
		}
		return c
	}
	return ""
}

func returnsTarget(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	switch r := ft.Results.List[0].Type.(type) {
	case *ast.Ident:
		return r.Name == "Target"
	case *ast.SelectorExpr:
		return r.Sel.Name == "Target"
	}
	return false
}
