package childsafe

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// frame is a statement list being scanned and the statement that owns it
// (nil: the function's body).
type frame struct {
	list  []ast.Stmt
	idx   int
	owner ast.Stmt
}

// forkSites finds the fork sites of f, checks their shape and the code
// the child runs there, and records their entry functions.
func (a *analysis) forkSites(f *fn) {
	if f.fork {
		return // a fork function's own calls of fork functions: it is child code as a whole
	}
	calls := map[*ast.CallExpr]bool{}
	ast.Inspect(f.decl.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && a.isForkCall(f.p, c) {
			calls[c] = false
		}
		return true
	})
	if len(calls) == 0 {
		return
	}
	a.scan(f, nil, f.decl.Body.List, nil, calls)
	for c, done := range calls {
		if !done {
			a.report(c.Pos(), "fork-site", "a fork call must stand alone as `pid, errno := f(...)` (or =), followed by `if ... pid == 0 { entry(...) }`")
		}
	}
}

func (a *analysis) isForkCall(p *pkg, c *ast.CallExpr) bool {
	f, _ := callee(p.info, c)
	if f == nil || p != a.main {
		return false
	}
	x := a.funcs[f.Origin().FullName()]
	return x != nil && x.fork
}

func (a *analysis) scan(f *fn, stack []frame, list []ast.Stmt, owner ast.Stmt, calls map[*ast.CallExpr]bool) {
	for i, s := range list {
		fr := append(stack[:len(stack):len(stack)], frame{list, i, owner})
		if as, ok := s.(*ast.AssignStmt); ok && len(as.Rhs) == 1 {
			if c, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr); ok {
				if _, isFork := calls[c]; isFork {
					calls[c] = true
					a.site(f, fr, as, c)
				}
			}
		}
		switch s := s.(type) {
		case *ast.BlockStmt:
			a.scan(f, fr, s.List, s, calls)
		case *ast.IfStmt:
			a.scan(f, fr, s.Body.List, s, calls)
			if s.Else != nil {
				a.scan(f, fr, []ast.Stmt{s.Else}, s, calls)
			}
		case *ast.ForStmt:
			a.scan(f, fr, s.Body.List, s, calls)
		case *ast.RangeStmt:
			a.scan(f, fr, s.Body.List, s, calls)
		case *ast.LabeledStmt:
			a.scan(f, fr, []ast.Stmt{s.Stmt}, s, calls)
		case *ast.SwitchStmt:
			for _, c := range s.Body.List {
				a.scan(f, fr, c.(*ast.CaseClause).Body, s, calls)
			}
		case *ast.TypeSwitchStmt:
			for _, c := range s.Body.List {
				a.scan(f, fr, c.(*ast.CaseClause).Body, s, calls)
			}
		case *ast.SelectStmt:
			for _, c := range s.Body.List {
				a.scan(f, fr, c.(*ast.CommClause).Body, s, calls)
			}
		}
	}
}

// site checks one fork site: as is `pid, errno := fork(...)` at the
// innermost frame of stack.
func (a *analysis) site(f *fn, stack []frame, as *ast.AssignStmt, c *ast.CallExpr) {
	w := a.walker(f)
	id, ok := as.Lhs[0].(*ast.Ident)
	if !ok || id.Name == "_" {
		a.report(as.Pos(), "fork-site", "the fork's first result (the pid) must go into a variable")
		return
	}
	pid := f.p.info.ObjectOf(id)
	if prim, _ := callee(f.p.info, c); prim != nil {
		a.roots = append(a.roots, prim.Origin().FullName()) // the child returns through it
	}
	for _, l := range as.Lhs {
		if lid, ok := l.(*ast.Ident); ok && lid.Name == "_" {
			continue
		}
		if !w.local(l) && hasPointers(w.typeOf(l)) {
			w.report(l, "pointer-write", "the child stores Go pointers outside a local variable")
		}
	}
	for level := len(stack) - 1; level >= 0; level-- {
		fr := stack[level]
		for j := fr.idx + 1; j < len(fr.list); j++ {
			st := fr.list[j]
			if ifs, ok := st.(*ast.IfStmt); ok && pidZero(f.p.info, ifs.Cond, pid) {
				a.childBranch(f, w, as, ifs)
				return
			}
			w.stmt(st) // the child runs it too
		}
		switch fr.owner.(type) {
		case nil:
			a.report(as.Pos(), "fork-site", "no `if ... pid == 0 {` follows the fork: the child would return into the parent's code")
			return
		case *ast.IfStmt, *ast.BlockStmt:
		default:
			a.report(as.Pos(), "fork-site", "the child would leave the %s around the fork before it reaches `if ... pid == 0 {`", nodeName(fr.owner))
			return
		}
	}
}

func nodeName(s ast.Stmt) string {
	switch s.(type) {
	case *ast.ForStmt, *ast.RangeStmt:
		return "loop"
	case *ast.SwitchStmt, *ast.TypeSwitchStmt:
		return "switch"
	case *ast.SelectStmt:
		return "select"
	}
	return fmt.Sprintf("%T", s)
}

// childBranch checks the child's branch of a fork site and records its
// entry.
func (a *analysis) childBranch(f *fn, w *walker, as *ast.AssignStmt, ifs *ast.IfStmt) {
	w.expr(ifs.Cond)
	var call *ast.CallExpr
	if len(ifs.Body.List) == 1 {
		if es, ok := ifs.Body.List[0].(*ast.ExprStmt); ok {
			call, _ = es.X.(*ast.CallExpr)
		}
	}
	if call == nil {
		a.report(ifs.Pos(), "fork-site", "the child's branch must be exactly one call of a %s entry function that never returns", DirChildSafe)
		return
	}
	w.expr(call)
	e, _ := callee(f.p.info, call)
	var x *fn
	if e != nil {
		x = a.funcs[e.Origin().FullName()]
	}
	if x == nil {
		a.report(call.Pos(), "fork-site", "the child's entry must be a function of the package")
		return
	}
	p := a.fset.Position(as.Pos())
	a.res.Entries = append(a.res.Entries, fmt.Sprintf("%s (fork site %s:%d in %s)", x.key, rel(p.Filename), p.Line, f.obj.Name()))
	a.entries = append(a.entries, x.key)
	if !a.noReturn(x, map[*fn]bool{}) {
		a.report(call.Pos(), "fork-site", "entry %s may return: the child would run on into the parent's code (end it with a call that never returns, such as an exit loop)", x.obj.Name())
	}
}

// pidZero: cond has a conjunct pid == 0.
func pidZero(info *types.Info, cond ast.Expr, pid types.Object) bool {
	switch e := ast.Unparen(cond).(type) {
	case *ast.BinaryExpr:
		switch e.Op {
		case token.LAND:
			return pidZero(info, e.X, pid) || pidZero(info, e.Y, pid)
		case token.EQL:
			return isObj(info, e.X, pid) && isZero(info, e.Y) || isObj(info, e.Y, pid) && isZero(info, e.X)
		}
	}
	return false
}

func isObj(info *types.Info, e ast.Expr, o types.Object) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && info.ObjectOf(id) == o
}

func isZero(info *types.Info, e ast.Expr) bool {
	tv := info.Types[e]
	return tv.Value != nil && tv.Value.String() == "0"
}

// noReturn: f never returns (it has no return statement and ends in an
// endless loop or a call of such a function).
func (a *analysis) noReturn(f *fn, seen map[*fn]bool) bool {
	if f.decl.Body == nil || seen[f] || len(f.decl.Body.List) == 0 {
		return false
	}
	seen[f] = true
	ret := false
	ast.Inspect(f.decl.Body, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.ReturnStmt:
			ret = true
		case *ast.FuncLit:
			return false
		}
		return !ret
	})
	return !ret && a.stmtNoReturn(f.p, f.decl.Body.List[len(f.decl.Body.List)-1], "", seen)
}

func (a *analysis) stmtNoReturn(p *pkg, s ast.Stmt, label string, seen map[*fn]bool) bool {
	switch s := s.(type) {
	case *ast.LabeledStmt:
		return a.stmtNoReturn(p, s.Stmt, s.Label.Name, seen)
	case *ast.BlockStmt:
		return len(s.List) > 0 && a.stmtNoReturn(p, s.List[len(s.List)-1], "", seen)
	case *ast.ForStmt:
		return s.Cond == nil && !breaks(s.Body, label, 0)
	case *ast.ExprStmt:
		c, ok := s.X.(*ast.CallExpr)
		if !ok {
			return false
		}
		f, _ := callee(p.info, c)
		if f == nil {
			return false
		}
		x := a.funcs[f.Origin().FullName()]
		return x != nil && a.noReturn(x, seen)
	}
	return false
}

// breaks: n has a break (or goto) that leaves the loop whose body it is
// (depth counts the breakable statements in between).
func breaks(n ast.Node, label string, depth int) bool {
	found := false
	ast.Inspect(n, func(m ast.Node) bool {
		if found || m == n {
			return !found
		}
		switch m := m.(type) {
		case *ast.FuncLit:
			return false
		case *ast.BranchStmt:
			switch {
			case m.Tok == token.GOTO:
				found = true
			case m.Tok == token.BREAK && m.Label == nil && depth == 0:
				found = true
			case m.Tok == token.BREAK && m.Label != nil && m.Label.Name == label:
				found = true
			}
		case *ast.ForStmt, *ast.RangeStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
			found = breaks(m, label, depth+1)
			return false
		}
		return true
	})
	return found
}
