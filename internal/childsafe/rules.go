package childsafe

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// walker checks the child code of one function.
type walker struct {
	a    *analysis
	p    *pkg
	f    *fn
	sig  *types.Signature
	defs map[types.Object]ast.Expr // local bools defined once: their definition (nil: assigned again)
}

func (a *analysis) walker(f *fn) *walker {
	w := &walker{a: a, p: f.p, f: f}
	w.sig, _ = f.obj.Type().(*types.Signature)
	return w
}

func (w *walker) report(n ast.Node, rule, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if w.f.followed {
		msg = "in " + w.f.key + " (followed from child code): " + msg
	}
	w.a.report(n.Pos(), rule, "%s", msg)
}

func (w *walker) typeOf(e ast.Expr) types.Type {
	if tv, ok := w.p.info.Types[e]; ok {
		return tv.Type
	}
	if id, ok := e.(*ast.Ident); ok {
		if o := w.p.info.ObjectOf(id); o != nil {
			return o.Type()
		}
	}
	return nil
}

// stmts walks a statement list of child code.
func (w *walker) stmts(list []ast.Stmt) {
	for i, s := range list {
		if _, isIf := s.(*ast.IfStmt); !isIf {
			if an, ok := w.a.hostAnnotation(w.p, s); ok {
				w.a.noteHost(s, "hostonly: "+an.reason)
				continue
			}
		}
		if w.stmt(s) && i+1 < len(list) {
			w.a.noteHost(list[i+1], "after `if "+w.a.cfg.ChildFlag[1]+" ... { return }`: the rest of the block")
			return
		}
	}
}

// stmt walks one statement; true: the rest of its block is host code.
func (w *walker) stmt(s ast.Stmt) bool {
	switch s := s.(type) {
	case nil, *ast.EmptyStmt, *ast.BranchStmt:
	case *ast.BlockStmt:
		w.stmts(s.List)
	case *ast.ExprStmt:
		w.expr(s.X)
	case *ast.AssignStmt:
		w.assign(s)
	case *ast.IncDecStmt:
		w.expr(s.X)
	case *ast.DeclStmt:
		w.decl(s)
	case *ast.ReturnStmt:
		for i, r := range s.Results {
			w.expr(r)
			if w.sig != nil && len(s.Results) == w.sig.Results().Len() {
				w.conv(w.sig.Results().At(i).Type(), r)
			}
		}
	case *ast.LabeledStmt:
		return w.stmt(s.Stmt)
	case *ast.IfStmt:
		return w.ifStmt(s)
	case *ast.ForStmt:
		w.stmt(s.Init)
		w.expr(s.Cond)
		w.stmt(s.Post)
		w.stmts(s.Body.List)
	case *ast.RangeStmt:
		w.rangeStmt(s)
	case *ast.SwitchStmt:
		w.stmt(s.Init)
		w.expr(s.Tag)
		for _, c := range s.Body.List {
			cc := c.(*ast.CaseClause)
			for _, e := range cc.List {
				w.expr(e)
			}
			w.stmts(cc.Body)
		}
	case *ast.TypeSwitchStmt:
		w.report(s, "interface", "type switch")
	case *ast.SelectStmt:
		w.report(s, "chan", "select")
	case *ast.SendStmt:
		w.report(s, "chan", "channel send")
	case *ast.GoStmt:
		w.report(s, "go", "go statement")
	case *ast.DeferStmt:
		w.report(s, "defer", "defer")
	default:
		w.report(s, "interface", "statement %T not understood by the analysis", s)
	}
	return false
}

func (w *walker) ifStmt(s *ast.IfStmt) bool {
	w.stmt(s.Init)
	w.expr(s.Cond)
	child := w.childCond(s.Cond)
	if an, ok := w.a.hostAnnotation(w.p, s); ok {
		w.a.noteHost(s, "hostonly: "+an.reason)
	} else if w.hostCond(s.Cond) {
		w.a.noteHost(s, "guarded by !"+w.a.cfg.ChildFlag[1])
	} else {
		w.stmts(s.Body.List)
	}
	if s.Else != nil {
		if child {
			w.a.noteHost(s.Else, "else of `if "+w.a.cfg.ChildFlag[1]+"`")
		} else {
			w.stmt(s.Else)
		}
	}
	if child && len(s.Body.List) > 0 {
		_, ret := s.Body.List[len(s.Body.List)-1].(*ast.ReturnStmt)
		return ret
	}
	return false
}

// isFlag: e is the child flag field.
func (w *walker) isFlag(e ast.Expr) bool {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok || w.a.flag == nil {
		return false
	}
	s, ok := w.p.info.Selections[sel]
	return ok && s.Kind() == types.FieldVal && s.Obj() == w.a.flag
}

// hostCond: e is false in every child (a conjunct !flag).
func (w *walker) hostCond(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.UnaryExpr:
		return e.Op == token.NOT && w.isFlag(e.X)
	case *ast.BinaryExpr:
		return e.Op == token.LAND && (w.hostCond(e.X) || w.hostCond(e.Y))
	case *ast.Ident:
		if d := w.localDef(e); d != nil {
			return w.hostCond(d)
		}
	}
	return false
}

// childCond: e is true in every child (a disjunct flag).
func (w *walker) childCond(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		return w.isFlag(e)
	case *ast.BinaryExpr:
		return e.Op == token.LOR && (w.childCond(e.X) || w.childCond(e.Y))
	}
	return false
}

// localDef is the definition of a local variable defined once (x := e)
// and never assigned again, or nil.
func (w *walker) localDef(id *ast.Ident) ast.Expr {
	obj := w.p.info.Uses[id]
	if obj == nil || w.f.decl.Body == nil {
		return nil
	}
	if w.defs == nil {
		w.defs = map[types.Object]ast.Expr{}
		assigned := map[types.Object]bool{}
		ast.Inspect(w.f.decl.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					id, ok := l.(*ast.Ident)
					if !ok {
						continue
					}
					if d := w.p.info.Defs[id]; d != nil && n.Tok == token.DEFINE && len(n.Lhs) == len(n.Rhs) {
						w.defs[d] = n.Rhs[i]
					} else if u := w.p.info.Uses[id]; u != nil {
						assigned[u] = true
					}
				}
			case *ast.UnaryExpr:
				if id, ok := n.X.(*ast.Ident); ok && n.Op == token.AND {
					assigned[w.p.info.Uses[id]] = true
				}
			}
			return true
		})
		for o := range assigned {
			delete(w.defs, o)
		}
	}
	return w.defs[obj]
}

func (w *walker) decl(s *ast.DeclStmt) {
	gd, ok := s.Decl.(*ast.GenDecl)
	if !ok {
		return
	}
	for _, sp := range gd.Specs {
		vs, ok := sp.(*ast.ValueSpec)
		if !ok {
			continue
		}
		for i, v := range vs.Values {
			w.expr(v)
			if i < len(vs.Names) && len(vs.Values) == len(vs.Names) {
				if o := w.p.info.Defs[vs.Names[i]]; o != nil {
					w.conv(o.Type(), v)
				}
			}
		}
	}
}

func (w *walker) assign(s *ast.AssignStmt) {
	for _, r := range s.Rhs {
		w.expr(r)
	}
	for i, l := range s.Lhs {
		if id, ok := l.(*ast.Ident); ok && id.Name == "_" {
			continue
		}
		w.lvalue(l)
		t := w.typeOf(l)
		if t == nil {
			continue
		}
		if s.Tok == token.ADD_ASSIGN && isString(t) {
			w.report(s, "concat", "string concatenation (+=)")
		}
		if s.Tok != token.DEFINE && !w.local(l) && hasPointers(t) {
			w.report(l, "pointer-write", "stores a %s (it holds Go pointers) outside a local variable: a write barrier may be on in the child", t)
		}
		if len(s.Lhs) == len(s.Rhs) && s.Tok == token.ASSIGN {
			w.conv(t, s.Rhs[i])
		}
	}
}

// lvalue walks the parts of an assignment's target that are evaluated.
func (w *walker) lvalue(l ast.Expr) {
	switch l := ast.Unparen(l).(type) {
	case *ast.Ident:
	case *ast.IndexExpr:
		if isMap(w.typeOf(l.X)) {
			w.report(l, "map", "map index assignment")
		}
		w.lvalue(l.X)
		w.expr(l.Index)
	case *ast.SelectorExpr:
		if _, ok := w.p.info.Selections[l]; ok {
			w.lvalue(l.X)
		}
	case *ast.StarExpr:
		w.expr(l.X)
	default:
		w.expr(l)
	}
}

// local: the location l is (part of) a local variable, not reached
// through a pointer, slice or map.
func (w *walker) local(l ast.Expr) bool {
	switch l := ast.Unparen(l).(type) {
	case *ast.Ident:
		v, ok := w.p.info.ObjectOf(l).(*types.Var)
		return ok && !v.IsField() && v.Parent() != nil && v.Parent() != w.p.types.Scope() && v.Parent() != types.Universe
	case *ast.SelectorExpr:
		s, ok := w.p.info.Selections[l]
		if !ok || s.Kind() != types.FieldVal || s.Indirect() {
			return false
		}
		return w.local(l.X)
	case *ast.IndexExpr:
		if _, ok := w.typeOf(l.X).Underlying().(*types.Array); ok {
			return w.local(l.X)
		}
	}
	return false
}

func (w *walker) rangeStmt(s *ast.RangeStmt) {
	w.expr(s.X)
	switch t := w.typeOf(s.X); {
	case t == nil:
	case isMap(t):
		w.report(s, "map", "range over a map")
	default:
		switch t.Underlying().(type) {
		case *types.Chan:
			w.report(s, "chan", "range over a channel")
		case *types.Signature:
			w.report(s, "funcvalue", "range over a function (an iterator called through a function value)")
		}
	}
	if s.Tok == token.ASSIGN {
		for _, l := range []ast.Expr{s.Key, s.Value} {
			if l != nil && !w.local(l) && hasPointers(w.typeOf(l)) {
				w.report(l, "pointer-write", "range stores Go pointers outside a local variable")
			}
		}
	}
	w.stmts(s.Body.List)
}

// conv reports an implicit conversion of src to the interface type dst.
func (w *walker) conv(dst types.Type, src ast.Expr) {
	if dst == nil || !types.IsInterface(dst) {
		return
	}
	tv, ok := w.p.info.Types[src]
	if !ok || tv.IsNil() || tv.Type == nil || types.IsInterface(tv.Type) {
		return
	}
	w.report(src, "interface", "converts %s to the interface %s", tv.Type, dst)
}

// expr walks an expression of child code.
func (w *walker) expr(e ast.Expr) {
	if e == nil {
		return
	}
	tv, ok := w.p.info.Types[e]
	if ok && (tv.IsType() || tv.Value != nil) {
		return // a type, or a constant the compiler folds
	}
	if ok && tv.Type != nil && !tv.IsNil() && types.IsInterface(tv.Type) {
		w.report(e, "interface", "a value of interface type %s", tv.Type)
	}
	switch e := e.(type) {
	case *ast.Ident, *ast.BasicLit:
	case *ast.ParenExpr:
		w.expr(e.X)
	case *ast.StarExpr:
		w.expr(e.X)
	case *ast.UnaryExpr:
		switch {
		case e.Op == token.ARROW:
			w.report(e, "chan", "channel receive")
		case e.Op == token.AND:
			if _, ok := ast.Unparen(e.X).(*ast.CompositeLit); ok {
				w.report(e, "alloc", "&T{...} may allocate on the heap")
			}
		}
		w.expr(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD && isString(w.typeOf(e)) {
			w.report(e, "concat", "string concatenation")
		}
		w.expr(e.X)
		switch {
		case e.Op == token.LAND && w.hostCond(e.X):
			w.a.noteHost(e.Y, "right of `!"+w.a.cfg.ChildFlag[1]+" &&`")
		case e.Op == token.LOR && w.childCond(e.X):
			w.a.noteHost(e.Y, "right of `"+w.a.cfg.ChildFlag[1]+" ||`")
		default:
			w.expr(e.Y)
		}
	case *ast.SelectorExpr:
		if s, ok := w.p.info.Selections[e]; ok {
			if s.Kind() == types.MethodVal {
				w.report(e, "funcvalue", "method value %s (a closure)", e.Sel.Name)
			}
			w.expr(e.X)
		}
	case *ast.IndexExpr:
		if isMap(w.typeOf(e.X)) {
			w.report(e, "map", "map index")
		}
		w.expr(e.X)
		w.expr(e.Index)
	case *ast.IndexListExpr:
		w.expr(e.X)
	case *ast.SliceExpr:
		w.expr(e.X)
		w.expr(e.Low)
		w.expr(e.High)
		w.expr(e.Max)
	case *ast.TypeAssertExpr:
		w.report(e, "interface", "type assertion")
		w.expr(e.X)
	case *ast.CompositeLit:
		w.composite(e)
	case *ast.KeyValueExpr:
		w.expr(e.Value)
	case *ast.FuncLit:
		if v := w.captures(e); v != "" {
			w.report(e, "closure", "function literal captures %s", v)
		}
	case *ast.CallExpr:
		w.call(e)
	default:
		w.report(e, "interface", "expression %T not understood by the analysis", e)
	}
}

func (w *walker) composite(e *ast.CompositeLit) {
	t := w.typeOf(e)
	if t == nil {
		return
	}
	switch u := t.Underlying().(type) {
	case *types.Map:
		w.report(e, "map", "map literal")
	case *types.Slice:
		w.report(e, "alloc", "slice literal (allocates its array)")
		for _, el := range e.Elts {
			w.expr(el)
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				el = kv.Value
			}
			w.conv(u.Elem(), el)
		}
	case *types.Array:
		for _, el := range e.Elts {
			w.expr(el)
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				el = kv.Value
			}
			w.conv(u.Elem(), el)
		}
	case *types.Struct:
		for i, el := range e.Elts {
			w.expr(el)
			var ft types.Type
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok {
					if v, ok := w.p.info.ObjectOf(id).(*types.Var); ok {
						ft = v.Type()
					}
				}
				el = kv.Value
			} else if i < u.NumFields() {
				ft = u.Field(i).Type()
			}
			w.conv(ft, el)
		}
	}
}

// captures names a variable the function literal captures, or "".
func (w *walker) captures(lit *ast.FuncLit) string {
	name := ""
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok || name != "" {
			return name == ""
		}
		v, ok := w.p.info.Uses[id].(*types.Var)
		if !ok || v.IsField() || v.Parent() == nil || v.Parent() == w.p.types.Scope() || v.Parent() == types.Universe {
			return true
		}
		if v.Pos() < lit.Pos() || v.Pos() >= lit.End() {
			name = v.Name()
		}
		return true
	})
	return name
}

// builtins child code may call (the others allocate, panic or touch maps
// or channels).
var okBuiltins = map[string]bool{"len": true, "cap": true, "min": true, "max": true, "copy": true, "clear": true,
	"complex": true, "real": true, "imag": true,
	"Sizeof": true, "Offsetof": true, "Alignof": true, "Add": true, "Slice": true, "String": true, "StringData": true, "SliceData": true}

func (w *walker) call(c *ast.CallExpr) {
	fun := ast.Unparen(c.Fun)
	for _, arg := range c.Args {
		w.expr(arg)
	}
	if tv, ok := w.p.info.Types[fun]; ok && tv.IsType() {
		w.conversion(c, tv.Type)
		return
	}
	if tv, ok := w.p.info.Types[fun]; ok && tv.IsBuiltin() {
		w.builtin(c, fun)
		return
	}
	f, iface := callee(w.p.info, c)
	if sel, ok := fun.(*ast.SelectorExpr); ok {
		if _, isSel := w.p.info.Selections[sel]; isSel {
			w.expr(sel.X)
		}
	}
	if f == nil {
		w.report(c, "funcvalue", "call through a function value")
		return
	}
	if iface {
		w.report(c, "interface", "call of %s through an interface", f.Name())
		return
	}
	if sig, ok := f.Type().(*types.Signature); ok {
		w.args(sig, c)
	}
	w.judge(c, f)
}

// args reports implicit conversions of arguments to interface parameters.
func (w *walker) args(sig *types.Signature, c *ast.CallExpr) {
	ps := sig.Params()
	for i, arg := range c.Args {
		var t types.Type
		switch {
		case sig.Variadic() && i >= ps.Len()-1 && !c.Ellipsis.IsValid():
			if s, ok := ps.At(ps.Len() - 1).Type().(*types.Slice); ok {
				t = s.Elem()
			}
		case i < ps.Len():
			t = ps.At(i).Type()
		}
		w.conv(t, arg)
	}
}

// judge decides whether child code may call f.
func (w *walker) judge(c *ast.CallExpr, f *types.Func) {
	f = f.Origin()
	key := f.FullName()
	path := ""
	if f.Pkg() != nil {
		path = f.Pkg().Path()
	}
	switch {
	case path == w.a.main.path:
		x := w.a.funcs[key]
		if !w.f.followed {
			w.a.edge(w.f.key, key)
		}
		if x == nil || !x.childsafe {
			w.report(c, "unmarked-call", "calls %s, which is not marked %s", f.Name(), DirChildSafe)
		}
	case w.a.cfg.Allow[key] != "" || w.a.cfg.Allow[path] != "":
	case w.f.followed && path == w.p.path, w.a.followed(path):
		x, err := w.a.follow(f)
		if err != nil {
			w.report(c, "not-allowed", "calls %s, which the analysis cannot follow: %v", key, err)
		} else if x.decl.Body == nil {
			w.report(c, "not-allowed", "calls %s, which has no Go body to check", key)
		}
	case isHostPackage(path):
		w.report(c, "host-package", "calls %s (package %s)", key, path)
	default:
		w.report(c, "not-allowed", "calls %s, which is neither marked, followed nor allowed", key)
	}
}

func (w *walker) builtin(c *ast.CallExpr, fun ast.Expr) {
	var name string
	switch f := fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	}
	switch name {
	case "append":
		w.report(c, "append", "append may grow the slice (allocate)")
	case "new":
		w.report(c, "alloc", "new")
	case "make":
		if len(c.Args) > 0 && isMap(w.typeOf(c.Args[0])) {
			w.report(c, "map", "make(map)")
		} else {
			w.report(c, "alloc", "make")
		}
	case "panic", "recover", "print", "println":
		w.report(c, "panic", "%s", name)
	case "delete":
		w.report(c, "map", "delete")
	case "close":
		w.report(c, "chan", "close")
	case "copy":
		if len(c.Args) > 0 {
			if s, ok := w.typeOf(c.Args[0]).Underlying().(*types.Slice); ok && hasPointers(s.Elem()) && !w.local(c.Args[0]) {
				w.report(c, "pointer-write", "copy of elements that hold Go pointers")
			}
		}
	default:
		if !okBuiltins[name] {
			w.report(c, "alloc", "builtin %s", name)
		}
	}
}

func (w *walker) conversion(c *ast.CallExpr, to types.Type) {
	if len(c.Args) != 1 {
		return
	}
	from := w.typeOf(c.Args[0])
	if from == nil {
		return
	}
	if types.IsInterface(to) && !types.IsInterface(from) {
		w.report(c, "interface", "converts %s to the interface %s", from, to)
		return
	}
	if tv := w.p.info.Types[c.Args[0]]; tv.Value != nil {
		return
	}
	if isString(to) && !isString(from) || isBytesOrRunes(to) && isString(from) {
		w.report(c, "alloc", "conversion from %s to %s copies (allocates)", from, to)
	}
}

func isString(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

func isBytesOrRunes(t types.Type) bool {
	s, ok := t.Underlying().(*types.Slice)
	if !ok {
		return false
	}
	b, ok := s.Elem().Underlying().(*types.Basic)
	return ok && (b.Kind() == types.Byte || b.Kind() == types.Rune)
}

func isMap(t types.Type) bool {
	if t == nil {
		return false
	}
	_, ok := t.Underlying().(*types.Map)
	return ok
}

// hasPointers: a value of type t holds Go pointers (the collector scans
// it; storing it into the heap takes a write barrier).
func hasPointers(t types.Type) bool {
	return pointers(t, map[types.Type]bool{})
}

func pointers(t types.Type, seen map[types.Type]bool) bool {
	if t == nil || seen[t] {
		return false
	}
	seen[t] = true
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return u.Kind() == types.String || u.Kind() == types.UnsafePointer || u.Kind() == types.UntypedString
	case *types.Array:
		return u.Len() > 0 && pointers(u.Elem(), seen)
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			if pointers(u.Field(i).Type(), seen) {
				return true
			}
		}
		return false
	case *types.Tuple:
		return false
	}
	return true // pointer, slice, map, chan, func, interface, type parameter
}
