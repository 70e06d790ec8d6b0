// Package childsafe checks the rule for Go code that runs in a forked child
// of a multi-threaded Go process (agents/executor): after fork() only the
// forking thread exists in the child, every runtime lock another thread
// held stays locked, so the child must never enter the Go runtime: no
// allocation, no maps, interfaces, defer, channels, panics or closures,
// no writes of Go pointers (a GC write barrier may be on in the copied
// runtime state), no calls into fmt, sort, strings, log or reflect. A
// violation does not fail any test: it deadlocks a child, now and then,
// and shows up much later as an executor hang. The shape of the check is
// that of Go's own syscall/exec_linux.go discipline and gVisor's
// checkescape: the code carries marks, and a go/ast + go/types analysis
// holds it to them.
//
// # Directives
//
// A directive is a line comment with no space after the slashes, like
// //go:nosplit:
//
//	//forkfuzz:childsafe
//
// in a function's doc comment: the function may run in a forked child.
// Check holds its body to the rules below and fails every call from it to
// a function of the package that is not marked too.
//
//	//forkfuzz:fork
//
// in a function's doc comment: the function returns twice, like fork(2):
// in the parent with the child's pid, in the child with pid 0. Every call
// of it (outside other fork functions) is a fork site and must have the
// shape
//
//	pid, errno := rawFork()
//	[statements the child runs too, checked like child code]
//	if errno == 0 && pid == 0 { // a conjunct pid == 0
//		entry(...) // one call of a marked function that never returns
//	}
//
// and the entry functions are where reachability starts. A fork function
// with a Go body is child code too (the child returns through it) and
// must be marked childsafe.
//
//	//forkfuzz:hostonly <why>
//
// on a statement of child code (a trailing comment on its first line, or
// a comment line right above it): the statement never runs in a child,
// for the reason given (the analysis cannot see it, e.g. the program
// validator forbids it). On an if statement it covers the body only: the
// condition and the else branch stay child code. Every one is listed in
// the result, and one on no statement of child code is an error.
//
// Besides annotations the analysis knows one guard, Config.ChildFlag: a
// bool field that is true in every child. The body of `if !m.inChild
// [&& ...]` (directly, or through a local bool defined once from such a
// conjunction), the else branch of `if m.inChild [|| ...]` and the rest
// of a block after `if m.inChild [|| ...] { ...; return }` are host code;
// so is the right operand of `!m.inChild && x` and of `m.inChild || x`.
//
// # Rules
//
// In child code (marked functions, the functions of followed packages it
// calls, and the child's side of fork sites), outside host-only parts:
//
//   - map: a map literal, make(map), an index of a map, range over a map,
//     delete;
//   - defer, go, chan (channel operations, select), panic (panic,
//     recover, print);
//   - host-package: a call into fmt, sort, strings, strconv, log,
//     reflect, os, runtime, time, errors, bytes, sync, slices, maps, ...;
//   - unmarked-call: a call of a function of the package that is not
//     marked childsafe; not-allowed: a call of any other function that
//     is neither in Config.Allow nor in a followed package;
//   - append (it may grow the slice: forbidden outright, child code
//     indexes fixed arrays), alloc (new, make, &T{...}, a slice literal,
//     string <-> []byte conversions);
//   - interface (a value of interface type, a conversion to one, a type
//     switch or assertion, a method call through an interface);
//   - funcvalue (a call through a function value, a method value),
//     closure (a function literal that captures variables);
//   - concat (string concatenation);
//   - pointer-write (a store of a type holding Go pointers anywhere but
//     in a local variable, or copy of such elements);
//   - fork-site (a fork site of another shape, an entry that may return);
//   - placement (with Config.ChildFiles: a marked function outside the
//     child files, or an unmarked one inside them);
//   - directive (an unknown forkfuzz: directive, a hostonly without a
//     reason or on no child code).
//
// Implicit runtime calls the compiler inserts (bounds checks, nil checks
// that panic, stack-growth checks) are out of its reach: children rely on
// a pre-grown stack and on code that indexes within bounds.
package childsafe

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
)

// Directives.
const (
	DirChildSafe = "//forkfuzz:childsafe"
	DirFork      = "//forkfuzz:fork"
	DirHostOnly  = "//forkfuzz:hostonly"
	dirPrefix    = "//forkfuzz:"
)

// Config says what to check.
type Config struct {
	// Dir is the package's directory; its non-test files are checked.
	Dir string
	// Files, when set, are the files to check instead (paths).
	Files []string
	// PkgPath is its import path (default: "childsafe/checked").
	PkgPath string
	// WorkDir is where go list runs, inside the module (default: Dir).
	WorkDir string
	// Follow are import path prefixes whose functions child code may
	// call unmarked: they are checked by the same rules, transitively
	// (packages of the module that carry no marks).
	Follow []string
	// Allow maps a function's types.Func.FullName, or an import path
	// (every function and method of the package), to why child code may
	// call it.
	Allow map[string]string
	// ChildFlag names a bool field that is true in every child, as type
	// name (in the package) and field name: {"machine", "inChild"}.
	ChildFlag [2]string
	// ChildFiles, when set, is the file-name prefix of child code
	// ("child_"): every marked function lives in such a file and every
	// function there is marked.
	ChildFiles string
}

// Finding is one violation.
type Finding struct {
	Pos  token.Position
	Rule string
	Msg  string
}

func (f Finding) String() string { return fmt.Sprintf("%s: [%s] %s", f.Pos, f.Rule, f.Msg) }

// Result is what Check found and what it went by.
type Result struct {
	Findings    []Finding
	Entries     []string // entry functions, with the fork site that runs each
	Reachable   []string // functions of the package reachable from the entries
	Unreachable []string // marked functions no entry reaches
	HostOnly    []string // host-only parts of child code, and why
	Followed    []string // functions of followed packages that child code calls
	Assembly    []string // marked functions without a Go body (assembly: reviewed by hand)
}

// fn is a function declaration the analysis knows.
type fn struct {
	obj       *types.Func
	decl      *ast.FuncDecl
	p         *pkg
	key       string // FullName
	childsafe bool
	fork      bool
	followed  bool // in a followed package
}

type analysis struct {
	cfg      Config
	fset     *token.FileSet
	ld       *loader
	main     *pkg
	funcs    map[string]*fn // by key: the package's, then followed ones
	flag     *types.Var
	hostonly map[string]*annotation // by "file:line"
	found    map[string]bool
	edges    map[string]map[string]bool // child-code calls between the package's functions
	queue    []*fn                      // followed functions to check
	entries  []string                   // keys of the entry functions
	roots    []string                   // the fork functions fork sites call
	hostSeen map[string]bool
	res      Result
}

type annotation struct {
	pos    token.Position
	reason string
	used   bool
}

// Check loads the package in cfg.Dir and checks it.
func Check(cfg Config) (*Result, error) {
	if cfg.PkgPath == "" {
		cfg.PkgPath = "childsafe/checked"
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = cfg.Dir
	}
	fset := token.NewFileSet()
	a := &analysis{cfg: cfg, fset: fset, ld: newLoader(fset, cfg.WorkDir), funcs: map[string]*fn{},
		hostonly: map[string]*annotation{}, found: map[string]bool{}, edges: map[string]map[string]bool{}, hostSeen: map[string]bool{}}
	var files []*ast.File
	var names []string
	var err error
	if len(cfg.Files) > 0 {
		files, names, err = a.ld.parseFiles("", cfg.Files)
	} else {
		files, names, err = a.ld.parseDir(cfg.Dir)
	}
	if err != nil {
		return nil, err
	}
	if a.main, err = a.ld.check(cfg.PkgPath, files, names); err != nil {
		return nil, err
	}
	a.run()
	return &a.res, nil
}

func (a *analysis) report(pos token.Pos, rule, format string, args ...any) {
	p := a.fset.Position(pos)
	k := fmt.Sprintf("%s:%d:%d:%s", p.Filename, p.Line, p.Column, rule)
	if a.found[k] {
		return
	}
	a.found[k] = true
	a.res.Findings = append(a.res.Findings, Finding{Pos: p, Rule: rule, Msg: fmt.Sprintf(format, args...)})
}

func (a *analysis) run() {
	a.collect()
	a.findFlag()
	var all []*fn
	for _, f := range a.funcs {
		all = append(all, f)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].decl.Pos() < all[j].decl.Pos() })
	for _, f := range all {
		if f.decl.Body != nil {
			a.forkSites(f)
		}
	}
	for _, f := range all {
		switch {
		case f.childsafe && f.decl.Body != nil:
			w := a.walker(f)
			w.stmts(f.decl.Body.List)
		case f.childsafe:
			a.res.Assembly = append(a.res.Assembly, f.key)
		case f.fork && f.decl.Body != nil:
			a.report(f.decl.Pos(), "fork-site", "fork function %s has a Go body that the child runs: mark it %s", f.key, DirChildSafe)
		}
	}
	for len(a.queue) > 0 {
		f := a.queue[0]
		a.queue = a.queue[1:]
		w := a.walker(f)
		w.stmts(f.decl.Body.List)
	}
	for _, an := range a.hostonly {
		if !an.used {
			a.report(a.posOf(an.pos), "directive", "%s annotation on no statement of child code", DirHostOnly)
		}
	}
	a.placement(all)
	a.reach(all)
	sort.Slice(a.res.Findings, func(i, j int) bool {
		x, y := a.res.Findings[i].Pos, a.res.Findings[j].Pos
		if x.Filename != y.Filename {
			return x.Filename < y.Filename
		}
		if x.Line != y.Line {
			return x.Line < y.Line
		}
		return a.res.Findings[i].Rule < a.res.Findings[j].Rule
	})
	sort.Strings(a.res.HostOnly)
	sort.Strings(a.res.Followed)
	sort.Strings(a.res.Assembly)
}

func (a *analysis) posOf(p token.Position) token.Pos {
	var out token.Pos
	a.fset.Iterate(func(f *token.File) bool {
		if f.Name() == p.Filename {
			out = f.LineStart(p.Line)
			return false
		}
		return true
	})
	return out
}

// collect reads the directives of the package's functions and its
// hostonly annotations.
func (a *analysis) collect() {
	for _, f := range a.main.files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if !strings.HasPrefix(c.Text, dirPrefix) {
					continue
				}
				word, rest, _ := strings.Cut(c.Text, " ")
				switch word {
				case DirChildSafe, DirFork:
				case DirHostOnly:
					p := a.fset.Position(c.Pos())
					if strings.TrimSpace(rest) == "" {
						a.report(c.Pos(), "directive", "%s needs a reason", DirHostOnly)
					}
					a.hostonly[fmt.Sprintf("%s:%d", p.Filename, p.Line)] = &annotation{pos: p, reason: strings.TrimSpace(rest)}
				default:
					a.report(c.Pos(), "directive", "unknown directive %s", word)
				}
			}
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			obj, _ := a.main.info.Defs[fd.Name].(*types.Func)
			if obj == nil {
				continue
			}
			x := &fn{obj: obj, decl: fd, p: a.main, key: obj.FullName()}
			if fd.Doc != nil {
				for _, c := range fd.Doc.List {
					word, _, _ := strings.Cut(c.Text, " ")
					x.childsafe = x.childsafe || word == DirChildSafe
					x.fork = x.fork || word == DirFork
				}
			}
			a.funcs[x.key] = x
		}
	}
}

func (a *analysis) findFlag() {
	if a.cfg.ChildFlag[0] == "" {
		return
	}
	tn, _ := a.main.types.Scope().Lookup(a.cfg.ChildFlag[0]).(*types.TypeName)
	if tn == nil {
		return
	}
	st, _ := tn.Type().Underlying().(*types.Struct)
	for i := 0; st != nil && i < st.NumFields(); i++ {
		if st.Field(i).Name() == a.cfg.ChildFlag[1] {
			a.flag = st.Field(i)
		}
	}
}

// hostAnnotation returns the hostonly annotation of statement s, if any.
func (a *analysis) hostAnnotation(p *pkg, s ast.Stmt) (*annotation, bool) {
	if p != a.main {
		return nil, false
	}
	pos := a.fset.Position(s.Pos())
	for _, line := range []int{pos.Line, pos.Line - 1} {
		if an, ok := a.hostonly[fmt.Sprintf("%s:%d", pos.Filename, line)]; ok {
			an.used = true
			return an, true
		}
	}
	return nil, false
}

func (a *analysis) noteHost(n ast.Node, why string) {
	p := a.fset.Position(n.Pos())
	s := fmt.Sprintf("%s:%d: %s", rel(p.Filename), p.Line, why)
	if !a.hostSeen[s] {
		a.hostSeen[s] = true
		a.res.HostOnly = append(a.res.HostOnly, s)
	}
}

func rel(name string) string { return filepath.Base(name) }

// callee resolves a call to a static function: the function and whether
// the call goes through an interface; nil for builtins, conversions and
// calls through function values.
func callee(info *types.Info, call *ast.CallExpr) (f *types.Func, viaInterface bool) {
	fun := ast.Unparen(call.Fun)
	switch x := fun.(type) {
	case *ast.IndexExpr:
		fun = x.X
	case *ast.IndexListExpr:
		fun = x.X
	}
	switch x := fun.(type) {
	case *ast.Ident:
		f, _ = info.Uses[x].(*types.Func)
		return f, false
	case *ast.SelectorExpr:
		if sel, ok := info.Selections[x]; ok {
			switch sel.Kind() {
			case types.MethodVal:
				f, _ = sel.Obj().(*types.Func)
				return f, types.IsInterface(sel.Recv())
			case types.MethodExpr:
				f, _ = sel.Obj().(*types.Func)
				return f, types.IsInterface(sel.Recv())
			}
			return nil, false
		}
		f, _ = info.Uses[x.Sel].(*types.Func)
		return f, false
	}
	return nil, false
}

// hostPackages are packages child code must not call into, by import
// path prefix (rule host-package).
var hostPackages = []string{"fmt", "sort", "strings", "strconv", "log", "reflect", "os", "runtime", "time",
	"errors", "bytes", "sync", "slices", "maps", "bufio", "io", "encoding/json", "path", "unicode/utf8", "math/big"}

func isHostPackage(path string) bool {
	if path == "sync/atomic" {
		return false
	}
	for _, h := range hostPackages {
		if path == h || strings.HasPrefix(path, h+"/") {
			return true
		}
	}
	return false
}

func (a *analysis) followed(path string) bool {
	if path == a.main.path {
		return false
	}
	for _, p := range a.cfg.Follow {
		if path == p || strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// follow returns the followed function f, queuing it for its check the
// first time.
func (a *analysis) follow(f *types.Func) (*fn, error) {
	key := f.Origin().FullName()
	if x, ok := a.funcs[key]; ok {
		return x, nil
	}
	p, err := a.ld.follow(f.Pkg().Path())
	if err != nil {
		return nil, err
	}
	for _, file := range p.files {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			obj, _ := p.info.Defs[fd.Name].(*types.Func)
			if obj == nil || obj.FullName() != key {
				continue
			}
			x := &fn{obj: obj, decl: fd, p: p, key: key, followed: true}
			a.funcs[key] = x
			a.res.Followed = append(a.res.Followed, key)
			if fd.Body != nil {
				a.queue = append(a.queue, x)
			}
			return x, nil
		}
	}
	return nil, fmt.Errorf("no declaration of %s in %s", key, p.path)
}

// placement checks that child code and host code do not share files.
func (a *analysis) placement(all []*fn) {
	if a.cfg.ChildFiles == "" {
		return
	}
	for _, f := range all {
		if f.followed {
			continue
		}
		name := filepath.Base(a.fset.Position(f.decl.Pos()).Filename)
		inChild := strings.HasPrefix(name, a.cfg.ChildFiles)
		switch {
		case f.childsafe && !inChild:
			a.report(f.decl.Pos(), "placement", "%s is marked childsafe but lives in %s: child code goes in %s*.go files", f.key, name, a.cfg.ChildFiles)
		case !f.childsafe && inChild:
			a.report(f.decl.Pos(), "placement", "%s is not marked childsafe but lives in the child file %s: host code goes elsewhere", f.key, name)
		}
	}
}

// reach computes the package's functions reachable from the entries.
func (a *analysis) reach(all []*fn) {
	seen := map[string]bool{}
	var stack []string
	for _, k := range append(a.entries, a.roots...) {
		if !seen[k] {
			seen[k] = true
			stack = append(stack, k)
		}
	}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for c := range a.edges[k] {
			if !seen[c] {
				seen[c] = true
				stack = append(stack, c)
			}
		}
	}
	for _, f := range all {
		if f.followed {
			continue
		}
		if seen[f.key] {
			a.res.Reachable = append(a.res.Reachable, f.key)
			if !f.childsafe {
				a.report(f.decl.Pos(), "unmarked-call", "%s is reachable from a forked child but not marked %s", f.key, DirChildSafe)
			}
		} else if f.childsafe {
			a.res.Unreachable = append(a.res.Unreachable, f.key)
		}
	}
	sort.Strings(a.res.Reachable)
	sort.Strings(a.res.Unreachable)
	sort.Strings(a.res.Entries)
}

func (a *analysis) edge(from, to string) {
	if a.edges[from] == nil {
		a.edges[from] = map[string]bool{}
	}
	a.edges[from][to] = true
}
