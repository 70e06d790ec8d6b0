package prog

// Fault injection attributes of fork operations (issue 6). Kept apart from
// format.go and validate.go so the shared files change as little as
// possible.

// forkArgs parses the optional key=value arguments of a fork.
func (ps *parser) forkArgs(op *Op, toks []token) error {
	if len(toks) == 0 {
		return nil
	}
	kv, err := ps.args(toks, map[string]bool{"fail_nth": false, "oom_memcg": false, "childfail": false, "child_oom": false, "hold": false})
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
	if t, ok := kv["oom_memcg"]; ok {
		v, err := ps.num(t)
		if err != nil {
			return err
		}
		if v < 1 || v > MaxOOMMemcg {
			return ps.errf(t.col, "oom_memcg %d out of range 1..%d", v, uint64(MaxOOMMemcg))
		}
		op.OOMMemcg = v
	}
	if t, ok := kv["childfail"]; ok {
		v, err := ps.num(t)
		if err != nil {
			return err
		}
		if v < 1 || v > MaxFailNth {
			return ps.errf(t.col, "childfail %d out of range 1..%d", v, MaxFailNth)
		}
		op.ChildFail = int(v)
	}
	if t, ok := kv["child_oom"]; ok {
		v, err := ps.num(t)
		if err != nil {
			return err
		}
		if v < 1 || v > MaxOOMMemcg {
			return ps.errf(t.col, "child_oom %d out of range 1..%d", v, uint64(MaxOOMMemcg))
		}
		op.ChildOOM = v
	}
	if t, ok := kv["hold"]; ok {
		v, err := ps.num(t)
		if err != nil {
			return err
		}
		if v < 1 || v > MaxHold {
			return ps.errf(t.col, "hold %d out of range 1..%d", v, MaxHold)
		}
		op.Hold = int(v)
	}
	return nil
}

// MaxOOMMemcg bounds a fork's oom_memcg (bytes).
const MaxOOMMemcg = 1 << 40

// validateFailNth checks the fault-injection attributes of operation i.
func (p *Program) validateFailNth(i int) error {
	op := &p.Ops[i]
	if op.FailNth == 0 && op.OOMMemcg == 0 && op.ChildFail == 0 && op.ChildOOM == 0 {
		return nil
	}
	if op.Kind != OpFork {
		return &ValidationError{Op: i, Region: -1, Msg: "fail_nth, oom_memcg, childfail and child_oom are attributes of fork only"}
	}
	if err := p.validateChildFail(i); err != nil {
		return err
	}
	if op.FailNth < 0 || op.FailNth > MaxFailNth {
		return &ValidationError{Op: i, Region: -1, Msg: "fail_nth out of range 1..1048576"}
	}
	if op.OOMMemcg > MaxOOMMemcg {
		return &ValidationError{Op: i, Region: -1, Msg: "oom_memcg out of range"}
	}
	if op.Proc != 0 {
		// The executor measures the parent around an injected failure with
		// the Go runtime (maps, content digests, page-table counters),
		// which a forked child cannot use.
		return &ValidationError{Op: i, Region: -1, Msg: "fail_nth, oom_memcg, childfail and child_oom are supported on forks of the main process only"}
	}
	return nil
}

// Injected returns the fork operations of p that carry fault injection
// (fail_nth, oom_memcg or childfail).
func (p *Program) Injected() []int {
	var out []int
	for i, op := range p.Ops {
		if op.Kind == OpFork && (op.FailNth > 0 || op.OOMMemcg > 0 || op.ChildFail > 0 || op.ChildOOM > 0) {
			out = append(out, i)
		}
	}
	return out
}
