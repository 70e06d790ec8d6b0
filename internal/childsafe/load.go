package childsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// listed is one package of `go list -export -deps -json`.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Standard   bool
	Error      *struct{ Err string }
}

// pkg is a type-checked package: its syntax and type information.
type pkg struct {
	path  string
	files []*ast.File
	names []string // file paths, parallel to files
	types *types.Package
	info  *types.Info
}

// loader type-checks packages from source against the export data of
// their imports, which `go list -export` builds (from the build cache:
// no new dependency, no golang.org/x/tools).
type loader struct {
	fset    *token.FileSet
	workDir string             // where go list runs (inside the module)
	listed  map[string]*listed // by import path
	byPath  map[string]*pkg    // followed packages, type-checked from source
}

func newLoader(fset *token.FileSet, workDir string) *loader {
	return &loader{fset: fset, workDir: workDir, listed: map[string]*listed{}, byPath: map[string]*pkg{}}
}

// goCmd is the go command: the one on PATH, else GOROOT's.
func goCmd() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(build.Default.GOROOT, "bin", "go")
}

// list runs go list on the patterns not listed yet (with their
// dependencies).
func (l *loader) list(patterns []string) error {
	var todo []string
	for _, p := range patterns {
		if _, ok := l.listed[p]; !ok && p != "unsafe" && p != "C" {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	sort.Strings(todo)
	args := append([]string{"list", "-e", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Standard,Error", "--"}, todo...)
	cmd := exec.Command(goCmd(), args...)
	cmd.Dir = l.workDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list %s: %v: %s", strings.Join(todo, " "), err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("go list output: %v", err)
		}
		if p.Error != nil {
			return fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		l.listed[p.ImportPath] = &p
	}
	return nil
}

func (l *loader) importer() types.Importer {
	return importer.ForCompiler(l.fset, "gc", func(path string) (io.ReadCloser, error) {
		p := l.listed[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(p.Export)
	})
}

// parseDir parses the non-test Go files of dir that build for the
// default context (GOOS/GOARCH of the test).
func (l *loader) parseDir(dir string) ([]*ast.File, []string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		names = append(names, n)
	}
	return l.parseFiles(dir, names)
}

func (l *loader) parseFiles(dir string, names []string) ([]*ast.File, []string, error) {
	var files []*ast.File
	var paths []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		f, err := parser.ParseFile(l.fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
		paths = append(paths, p)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s: no Go files", dir)
	}
	return files, paths, nil
}

// check type-checks files as package path, listing their imports first.
func (l *loader) check(path string, files []*ast.File, names []string) (*pkg, error) {
	imports := map[string]bool{}
	for _, f := range files {
		for _, im := range f.Imports {
			imports[strings.Trim(im.Path.Value, `"`)] = true
		}
	}
	var ims []string
	for p := range imports {
		ims = append(ims, p)
	}
	if err := l.list(ims); err != nil {
		return nil, err
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Implicits:  map[ast.Node]types.Object{},
		Scopes:     map[ast.Node]*types.Scope{},
	}
	conf := types.Config{Importer: l.importer(), Sizes: types.SizesFor("gc", build.Default.GOARCH)}
	tp, err := conf.Check(path, l.fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type-check %s: %v", path, err)
	}
	return &pkg{path: path, files: files, names: names, types: tp, info: info}, nil
}

// follow returns the followed package path, type-checked from source
// (its directory and files as go list reports them).
func (l *loader) follow(path string) (*pkg, error) {
	if p, ok := l.byPath[path]; ok {
		return p, nil
	}
	if err := l.list([]string{path}); err != nil {
		return nil, err
	}
	lp := l.listed[path]
	if lp == nil {
		return nil, fmt.Errorf("go list did not list %s", path)
	}
	files, names, err := l.parseFiles(lp.Dir, lp.GoFiles)
	if err != nil {
		return nil, err
	}
	p, err := l.check(path, files, names)
	if err != nil {
		return nil, err
	}
	l.byPath[path] = p
	return p, nil
}
