package prog

// Fault injection attributes of fork operations (issue 6). Kept apart from
// format.go and validate.go so the shared files change as little as
// possible.

// forkArgs parses the optional key=value arguments of a fork.
func (ps *parser) forkArgs(op *Op, toks []token) error {
	if len(toks) == 0 {
		return nil
	}
	kv, err := ps.args(toks, map[string]bool{"fail_nth": false})
	if err != nil {
		return err
	}
	if t, ok := kv["fail_nth"]; ok {
		v, err := ps.num(t)
		if err != nil {
			return err
		}
		if v < 1 || v > MaxFailNth {
			return ps.errf(t.col, "fail_nth %d out of range 1..%d", v, MaxFailNth)
		}
		op.FailNth = int(v)
	}
	return nil
}

// validateFailNth checks the fault-injection attributes of operation i.
func (p *Program) validateFailNth(i int) error {
	op := &p.Ops[i]
	if op.FailNth == 0 {
		return nil
	}
	if op.Kind != OpFork {
		return &ValidationError{Op: i, Region: -1, Msg: "fail_nth is an attribute of fork only"}
	}
	if op.FailNth < 0 || op.FailNth > MaxFailNth {
		return &ValidationError{Op: i, Region: -1, Msg: "fail_nth out of range 1..1048576"}
	}
	if op.Proc != 0 {
		// The executor measures the parent around an injected failure with
		// the Go runtime (maps, content digests, page-table counters),
		// which a forked child cannot use.
		return &ValidationError{Op: i, Region: -1, Msg: "fail_nth is supported on forks of the main process only"}
	}
	return nil
}

// Injected returns the fork operations of p that carry fault injection.
func (p *Program) Injected() []int {
	var out []int
	for i, op := range p.Ops {
		if op.Kind == OpFork && op.FailNth > 0 {
			out = append(out, i)
		}
	}
	return out
}
