package checker

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// fork creates the child of fork op.Fork as a copy of pr with Linux's
// fork rules: MADV_DONTFORK mappings are absent, MADV_WIPEONFORK mappings
// are empty (the flag stays), mlock is not inherited, private content is
// copied (copy-on-write) and shared mappings keep their object.
func (m *machine) fork(pr *proc, i int) {
	op := &m.p.Ops[i]
	child := m.procs[op.Fork+1]
	r := m.result(pr, i, m.forkPred(i)) // rollback.go
	if r.Errno != 0 {
		child.state = forkFailed
		return
	}
	m.setRet(i, uint64(10000+op.Fork))
	child.state = blocked
	if !m.checking() && m.copyKill == i+1 {
		// NewSpecCopyKilled: the expected run records the child's death
		// the way the executor does, so the checking pass follows it.
		m.exp.Rollbacks = append(m.exp.Rollbacks, obs.Rollback{Fork: op.Fork, Op: i, Cause: obs.CauseChildFail, FailNth: op.ChildFail,
			Child: &obs.ChildFault{FailNth: op.ChildFail, ChildOOM: op.ChildOOM, Injection: obs.InjInjected, Outcome: obs.ChildDied, Signal: sigKILL}})
		defer func() { child.state, child.copyKilled = killed, true }()
	}
	if m.checking() && rollbackOf(m.o, i).CopyKilled() {
		// childfail: the child died on its way to user space (its
		// copy of the page tables failed); it never runs, like a child
		// killed before it was released (the rollback oracle judges
		// how it died and the parent).
		defer func() { child.state, child.copyKilled = killed, true }()
	}
	child.forkSeq = m.opSeq[i]
	child.anon = pageMap{}
	child.reset = map[int]int{}
	child.segs = make([]seg, 0, len(pr.segs))
	for _, s := range pr.segs {
		if s.dontfork && !s.unknown {
			child.holes = append(child.holes, hole{s.start, s.end})
			continue
		}
		c := s
		c.lock, c.onfault = no, false
		c.uffd = 0
		if s.wipe && !s.unknown {
			c.origin, c.originWhy = i, "MADV_WIPEONFORK at fork"
			for _, k := range pr.anon.keysIn(s.start, s.end) {
				if !pr.anon[k].isZero() {
					child.reset[k] = i
				}
			}
		} else {
			for _, k := range pr.anon.keysIn(s.start, s.end) {
				child.anon[k] = m.pin.forkPage(pr.anon[k])
			}
		}
		child.segs = append(child.segs, c)
	}
}

func (m *machine) kill(pr *proc, i int) {
	op := &m.p.Ops[i]
	child := m.procs[op.Fork+1]
	if child.state == forkFailed {
		m.result(pr, i, certain(eSRCH, "the fork failed, there is no child to kill"))
		return
	}
	r := m.result(pr, i, certain(eOK, "the child exists and is blocked"))
	if r.Errno == 0 {
		child.state = killed
	}
}

func (m *machine) wait(pr *proc, i int) {
	op := &m.p.Ops[i]
	child := m.procs[op.Fork+1]
	switch child.state {
	case forkFailed:
		m.result(pr, i, certain(eCHILD, "the fork failed, there is no child to wait for"))
		return
	case killed:
		r := m.result(pr, i, certain(eOK, "a killed child can be reaped"))
		m.setRet(i, sigKILL)
		if m.checking() {
			m.cmp.killedChildRan(child, op.Fork)
			if child.copyKilled {
				// How a child died of its failed copy is the rollback
				// oracle's (rollback:child-copy-signal).
				child.state = exited
				return
			}
			if r.Errno == 0 && r.Ret&0x7f != sigKILL {
				m.cmp.killedStatus(child, i, r.Ret)
			}
		}
		child.state = exited
		return
	}
	// Release the child: it takes its start view, runs, reaps its own
	// children and exits while pr sleeps.
	child.state = running
	m.view(child, obs.AtStart)
	m.runProc(child.id)
	child.state = exited
	child.release()
	r := m.result(pr, i, certain(eOK, "the child exists"))
	m.setRet(i, 0)
	if m.checking() && r.Errno == 0 && r.Ret != 0 {
		m.cmp.childStatus(child, i, r.Ret)
	}
}

// killedHow says how the child of fork f was killed before it ran.
func (m *machine) killedHow(f int) string {
	if c := m.procs[f+1]; c != nil && c.copyKilled {
		return fmt.Sprintf("killed on its way to user space after a fault injected into its side of %s", opRef(m.p, m.p.ForkOp(f)))
	}
	return fmt.Sprintf("killed by %s before it was released", opRef(m.p, m.killOp(f)))
}

func (m *machine) killOp(f int) int {
	for j, op := range m.p.Ops {
		if op.Kind == prog.OpKill && op.Fork == f {
			return j
		}
	}
	return -1
}

func statusClass(st uint64) string {
	if st&0x7f == 0 {
		return "exit-code"
	}
	if st&0x7f == 0x7f {
		return "stopped"
	}
	return fmt.Sprintf("signal-%d", st&0x7f)
}

func statusString(st uint64) string {
	switch {
	case st&0x7f == 0:
		return fmt.Sprintf("exited with code %d", (st>>8)&0xff)
	case st&0x7f == 0x7f:
		return fmt.Sprintf("stopped by signal %d", (st>>8)&0xff)
	}
	s := fmt.Sprintf("killed by signal %d", st&0x7f)
	if st&0x80 != 0 {
		s += ", core dumped"
	}
	return s
}

// inherited reports whether the effects of op j (run by process W) are
// part of process v's history: W is v, or an ancestor of v and j ran
// before the fork that leads towards v.
func (m *machine) inherited(j, v int) bool {
	w := m.writer(j)
	cur := v
	for cur != w {
		if cur == 0 {
			return false
		}
		c := m.procs[cur]
		if c.parent == w {
			return m.opSeq[j] >= 0 && m.opSeq[j] < c.forkSeq
		}
		cur = c.parent
	}
	return true
}

// writer returns the process whose memory operation j writes: the
// target of a procmem or pvwrite into a child, else the op's own process.
func (m *machine) writer(j int) int {
	if op := &m.p.Ops[j]; op.Into > 0 && (op.Kind == prog.OpProcMem || op.Kind == prog.OpPVWrite) {
		return op.Into
	}
	return m.p.Ops[j].Proc
}

// ancestors returns v and its ancestors, v first.
func (m *machine) ancestors(v int) []int {
	var out []int
	for cur := v; cur >= 0; cur = m.procs[cur].parent {
		out = append(out, cur)
		if cur == 0 {
			break
		}
	}
	return out
}

// relation describes process w as seen from process v, and the fork that
// separates them.
func (m *machine) relation(w, v int) (role string, fork int) {
	if w == v {
		return "self", -1
	}
	av := m.ancestors(v)
	aw := m.ancestors(w)
	inV := map[int]int{}
	for d, x := range av {
		inV[x] = d
	}
	for dw, x := range aw {
		if dv, ok := inV[x]; ok {
			// x is the lowest common ancestor.
			switch {
			case dw == 0 && dv == 1:
				return "parent", av[0] - 1
			case dw == 0:
				return "ancestor", av[dv-1] - 1
			case dv == 0 && dw == 1:
				return "child", aw[0] - 1
			case dv == 0:
				return "descendant", aw[dw-1] - 1
			default:
				return "relative", av[dv-1] - 1
			}
		}
	}
	return "other", -1
}

func procName(id int) string {
	if id == 0 {
		return "main process"
	}
	return fmt.Sprintf("child of f%d", id-1)
}

func opRef(p *prog.Program, i int) string {
	if i < 0 || i >= len(p.Ops) {
		return fmt.Sprintf("op %d", i)
	}
	return fmt.Sprintf("op %d `%s`", i, p.Ops[i].String())
}
