package prog

import "fmt"

// ValidationError names the operation (or region) that breaks a rule.
type ValidationError struct {
	Op     int // operation index, or -1
	Region int // region index, or -1
	Msg    string
}

func (e *ValidationError) Error() string {
	switch {
	case e.Op >= 0:
		return fmt.Sprintf("op %d: %s", e.Op, e.Msg)
	case e.Region >= 0:
		return fmt.Sprintf("region r%d: %s", e.Region, e.Msg)
	}
	return e.Msg
}

// opErr is a ValidationError of operation i (-1: of the program).
func opErr(i int, format string, args ...any) error {
	return &ValidationError{Op: i, Region: -1, Msg: fmt.Sprintf(format, args...)}
}

// The states of a fork while Validate walks the operations.
const (
	forkUnborn = iota
	forkAlive
	forkReaped
)

// forkState is a fork's state and the process that forked it.
type forkState struct {
	state int
	proc  int
}

// validator walks p's operations in order: the forks so far, the loops
// (storeloop, migrateloop) and the pinned-page state.
type validator struct {
	p      *Program
	forks  []forkState
	loops  []int
	pinned pinnedState
}

// Validate checks that p is well formed: the executor can run every valid
// program without touching memory outside the arena, and every fork has a
// well-defined lifetime.
func (p *Program) Validate() error {
	if err := p.validateRegions(); err != nil {
		return err
	}
	v := &validator{p: p}
	for i := range p.Ops {
		if err := v.op(i); err != nil {
			return err
		}
	}
	if err := p.validateLoopWaits(v.loops); err != nil {
		return err
	}
	if err := p.validateJoins(); err != nil {
		return err
	}
	for _, i := range v.loops {
		f := p.Ops[i].Fork
		w := -1
		for j := i + 1; j < len(p.Ops); j++ {
			if p.Ops[j].Kind == OpWait && p.Ops[j].Fork == f && p.Ops[j].Proc == 0 {
				w = j
			}
		}
		if f < 0 || f >= len(v.forks) || v.forks[f].proc != 0 || w < 0 {
			return opErr(i, "%v until=f%d: that fork must be waited for by the main process after this operation", p.Ops[i].Kind, f)
		}
	}
	for f, st := range v.forks {
		if st.state != forkReaped {
			return opErr(-1, "fork f%d is never waited for", f)
		}
	}
	return nil
}

// validateRegions checks the arena, the regions and the number of
// operations.
func (p *Program) validateRegions() error {
	if len(p.Regions) == 0 || len(p.Regions) > MaxRegions {
		return &ValidationError{Op: -1, Region: -1, Msg: fmt.Sprintf("need 1..%d regions, have %d", MaxRegions, len(p.Regions))}
	}
	if p.Arena >= numArenas {
		return &ValidationError{Op: -1, Region: -1, Msg: fmt.Sprintf("bad arena %d", p.Arena)}
	}
	for i, r := range p.Regions {
		if r.Kind >= numRegionKinds {
			return &ValidationError{Op: -1, Region: i, Msg: fmt.Sprintf("bad kind %d", r.Kind)}
		}
		if r.Pages < 1 || r.Pages > MaxRegionPages {
			return &ValidationError{Op: -1, Region: i, Msg: fmt.Sprintf("pages %d out of range 1..%d", r.Pages, MaxRegionPages)}
		}
		if msg := r.Kind.HugetlbPagesErr(r.Pages); msg != "" {
			return &ValidationError{Op: -1, Region: i, Msg: msg}
		}
		if r.THP > THPOff {
			return &ValidationError{Op: -1, Region: i, Msg: fmt.Sprintf("bad thp %d", r.THP)}
		}
	}
	if len(p.Ops) > MaxOps {
		return opErr(-1, "too many operations: %d > %d", len(p.Ops), MaxOps)
	}
	return nil
}

// forkProc is the process that forked f and whether f is alive.
func (v *validator) forkProc(f int) (int, bool) {
	if f < 0 || f >= len(v.forks) {
		return -1, false
	}
	return v.forks[f].proc, v.forks[f].state == forkAlive
}

// procAlive reports whether process proc (0: the main one, f+1: fork f)
// runs.
func (v *validator) procAlive(proc int) bool {
	return proc == 0 || (proc-1 < len(v.forks) && v.forks[proc-1].state == forkAlive)
}

// region checks that operation i's region r exists.
func (v *validator) region(i int, r int) error {
	if r < 0 || r >= len(v.p.Regions) {
		return opErr(i, "no region r%d", r)
	}
	return nil
}

// op checks operation i.
func (v *validator) op(i int) error {
	p, op := v.p, v.p.Ops[i]
	if op.Kind >= numOpKinds {
		return opErr(i, "bad kind %d", op.Kind)
	}
	if op.Proc < 0 || !v.procAlive(op.Proc) {
		return opErr(i, "process f%d: not forked yet or already waited for", op.Proc-1)
	}
	if err := p.validateHold(i); err != nil {
		return err
	}
	if err := p.validateFailNth(i); err != nil {
		return err
	}
	if err := v.thread(i, &op); err != nil {
		return err
	}
	var err error
	switch op.Kind {
	case OpStoreLoop, OpStore, OpPwrite:
		err = v.store(i, &op)
	case OpMmap, OpMunmap, OpMprotect, OpMadvise, OpMremap, OpMlock, OpMunlock,
		OpMlockOnfault, OpMbind, OpAnonName, OpPMadvise, OpRemapFile, OpUffdReg, OpUffdUnreg:
		err = v.mapping(i, &op)
	case OpFork, OpWait, OpKill:
		err = v.fork(i, &op)
	case OpJoin:
		if op.Proc != 0 || op.Thread != 0 {
			return opErr(i, "join must run on the main thread of the main process")
		}
		if op.Peer < 1 || op.Peer > MaxThreads {
			return opErr(i, "join of thread t%d out of range 1..%d", op.Peer, MaxThreads)
		}
	case OpMigrate, OpMigrateLoop:
		if op.Kind == OpMigrateLoop {
			if op.Thread == 0 {
				return opErr(i, "migrateloop must run on a thread (tN:)")
			}
			v.loops = append(v.loops, i)
		}
		if err := v.region(i, op.Region); err != nil {
			return err
		}
		if msg := ioRangeError(&op, MaxMigratePages); msg != "" {
			return opErr(i, "%s", msg)
		}
	case OpCheck:
	default:
		if op.Kind.Pinned() {
			err = p.validatePinned(i, &v.pinned, v.forkProc)
		}
	}
	if err != nil {
		return err
	}
	if op.Kind == OpProcMem || op.Kind == OpPVWrite {
		if msg := slotRangeError(&op); msg != "" {
			return opErr(i, "%s", msg)
		}
	}
	return nil
}

// thread checks where operation i runs: threads run some operations,
// only in the main process.
func (v *validator) thread(i int, op *Op) error {
	if op.Thread < 0 || op.Thread > MaxThreads {
		return opErr(i, "thread t%d out of range 1..%d", op.Thread, MaxThreads)
	}
	if op.Thread == 0 {
		return nil
	}
	if op.Proc != 0 {
		return opErr(i, "threads run only in the main process")
	}
	switch op.Kind {
	case OpFork, OpWait, OpKill, OpCheck, OpJoin:
		return opErr(i, "%v must run on the main thread", op.Kind)
	case OpMmap:
		if v.p.Regions[min(max(op.Region, 0), len(v.p.Regions)-1)].Kind == AnonShared {
			return opErr(i, "mmap of an anon-shared region must run on the main thread")
		}
	}
	return nil
}

// store checks a store, storeloop or pwrite.
func (v *validator) store(i int, op *Op) error {
	if op.Kind == OpStoreLoop {
		if op.Thread == 0 {
			return opErr(i, "storeloop must run on a thread (tN:)")
		}
		v.loops = append(v.loops, i)
	}
	if err := v.region(i, op.Region); err != nil {
		return err
	}
	if op.Kind == OpPwrite && !v.p.Regions[op.Region].Kind.Memfd() {
		return opErr(i, "pwrite needs a memfd region, r%d is %v", op.Region, v.p.Regions[op.Region].Kind)
	}
	if msg := slotRangeError(op); msg != "" {
		return opErr(i, "%s", msg)
	}
	return nil
}

// mapping checks an operation on a range of a region's span.
func (v *validator) mapping(i int, op *Op) error {
	if err := v.region(i, op.Region); err != nil {
		return err
	}
	if op.Off > SpanBytes || op.Len > SpanBytes-op.Off {
		return opErr(i, "range off %#x len %#x runs past the region span (%#x bytes)", op.Off, op.Len, SpanBytes)
	}
	if op.Kind == OpMprotect && op.Prot >= numProts {
		return opErr(i, "bad prot %d", op.Prot)
	}
	if op.Kind == OpMadvise && op.Advice >= numAdvices {
		return opErr(i, "bad advice %d", op.Advice)
	}
	if op.Kind == OpPMadvise && !PMadviseAdvice(op.Advice) {
		return opErr(i, "pmadvise takes advice cold or pageout, not %v", op.Advice)
	}
	if op.Kind == OpMbind && op.Policy >= numPolicies {
		return opErr(i, "bad policy %d", op.Policy)
	}
	if op.Kind == OpAnonName && op.Name >= numAnonNames {
		return opErr(i, "bad name %d", op.Name)
	}
	if op.Kind == OpRemapFile && op.PgOff > MaxPgOff {
		return opErr(i, "pgoff %#x past the limit %#x", op.PgOff, MaxPgOff)
	}
	if op.Kind != OpMremap {
		return nil
	}
	if op.Flags&^mremapAll != 0 {
		return opErr(i, "bad mremap flags %#x", op.Flags)
	}
	if op.Flags&MremapFixed != 0 {
		if err := v.region(i, op.To); err != nil {
			return err
		}
		if op.ToOff > SpanBytes || op.NewLen > SpanBytes-op.ToOff {
			return opErr(i, "destination tooff %#x newlen %#x runs past the span of r%d", op.ToOff, op.NewLen, op.To)
		}
		return nil
	}
	if op.To != 0 || op.ToOff != 0 {
		return opErr(i, "to/tooff need the fixed flag")
	}
	if op.NewLen > SpanBytes-op.Off {
		return opErr(i, "newlen %#x runs past the region span", op.NewLen)
	}
	return nil
}

// fork checks a fork, wait or kill, and follows the fork's state.
func (v *validator) fork(i int, op *Op) error {
	if op.Kind == OpFork {
		if op.Fork != len(v.forks) {
			return opErr(i, "forks must be numbered in order: expected f%d, got f%d", len(v.forks), op.Fork)
		}
		if len(v.forks) >= MaxForks {
			return opErr(i, "too many forks (max %d)", MaxForks)
		}
		v.forks = append(v.forks, forkState{state: forkAlive, proc: op.Proc})
		return nil
	}
	if op.Fork < 0 || op.Fork >= len(v.forks) {
		return opErr(i, "%v of unknown fork f%d", op.Kind, op.Fork)
	}
	f := &v.forks[op.Fork]
	if f.proc != op.Proc {
		return opErr(i, "%v f%d must run in the process that forked it", op.Kind, op.Fork)
	}
	if f.state != forkAlive {
		return opErr(i, "%v f%d after it was waited for", op.Kind, op.Fork)
	}
	if op.Kind == OpWait {
		f.state = forkReaped
		// Everything the child forked must be reaped by now.
		for j := op.Fork + 1; j < len(v.forks); j++ {
			if v.forks[j].proc == op.Fork+1 && v.forks[j].state == forkAlive {
				return opErr(i, "wait f%d: its child f%d is never waited for", op.Fork, j)
			}
		}
	}
	return nil
}

// validateLoopWaits: a thread runs its operations in order, and the main
// thread blocks on a join and on handing over a storeloop or migrateloop
// (until its first pass): both would wait forever behind an earlier loop
// of the same thread that runs until a wait the main thread has not
// reached yet.
func (p *Program) validateLoopWaits(loops []int) error {
	waitAt := make(map[int]int)
	for j, op := range p.Ops {
		if op.Kind == OpWait && op.Proc == 0 {
			waitAt[op.Fork] = j
		}
	}
	for j, op := range p.Ops {
		t := op.Thread
		if op.Kind == OpJoin {
			t = op.Peer
		} else if !op.Kind.RunsUntil() {
			continue
		}
		for _, i := range loops {
			if i < j && p.Ops[i].Thread == t {
				if w, ok := waitAt[p.Ops[i].Fork]; ok && w > j {
					return opErr(j, "%v would wait forever: t%d's %v (op %d) runs until wait f%d, which comes later", op.Kind, t, p.Ops[i].Kind, i, p.Ops[i].Fork)
				}
			}
		}
	}
	return nil
}

// validateJoins checks that every join names a thread that ran an
// operation before it, and that every thread operation is joined by a
// later join of its thread (the end of the program does not join
// silently: a program says where its threads are waited for).
func (p *Program) validateJoins() error {
	lastOp := map[int]int{}   // thread -> index of its latest operation
	lastJoin := map[int]int{} // thread -> index of its latest join
	for i, op := range p.Ops {
		switch {
		case op.Kind == OpJoin:
			if _, ok := lastOp[op.Peer]; !ok {
				return &ValidationError{Op: i, Region: -1, Msg: fmt.Sprintf("join t%d: thread t%d runs no operation before it", op.Peer, op.Peer)}
			}
			lastJoin[op.Peer] = i
		case op.Thread > 0:
			lastOp[op.Thread] = i
		}
	}
	for t := 1; t <= MaxThreads; t++ {
		i, ok := lastOp[t]
		if j, joined := lastJoin[t]; ok && (!joined || j < i) {
			return &ValidationError{Op: i, Region: -1, Msg: fmt.Sprintf("thread t%d is never joined after this operation (add `join t%d` after it)", t, t)}
		}
	}
	return nil
}

// slotRangeError says what is wrong with the slots of a slot-writing
// operation, or returns "".
func slotRangeError(op *Op) string {
	switch {
	case op.Count < 1 || op.Count > MaxCount:
		return fmt.Sprintf("count %d out of range 1..%d", op.Count, MaxCount)
	case op.Off%SlotSize != 0 || op.Stride%SlotSize != 0 || op.Stride == 0:
		return fmt.Sprintf("off and stride must be non-zero multiples of %d (off %#x stride %#x)", SlotSize, op.Off, op.Stride)
	case op.Stride > SpanBytes || op.Off >= SpanBytes || op.Off+uint64(op.Count-1)*op.Stride+SlotSize > SpanBytes:
		return fmt.Sprintf("slots run past the region span (%#x bytes)", SpanBytes)
	}
	return ""
}
