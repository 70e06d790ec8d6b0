package prog

// RacedRegions returns, as a bit mask (bit r: region r), the regions whose
// words may change in ways the program's order does not fix: those a
// thread of the main process operates on, those another process writes
// into (procmem, pvwrite into a child), and every region a mremap moves
// such pages to or from. Views need these regions' words; elsewhere a
// page's digest decides (executor.Options.DigestsFirst).
func (p *Program) RacedRegions() uint64 {
	var m uint64
	for i := range p.Ops {
		op := &p.Ops[i]
		switch {
		case op.Thread > 0:
			m |= 1 << uint(op.Region)
			if op.Kind == OpMremap && op.Flags&MremapFixed != 0 {
				m |= 1 << uint(op.To)
			}
		case (op.Kind == OpProcMem || op.Kind == OpPVWrite) && op.Into != 0:
			m |= 1 << uint(op.Region)
		}
	}
	for changed := m != 0; changed; {
		changed = false
		for i := range p.Ops {
			op := &p.Ops[i]
			if op.Kind != OpMremap || op.Flags&MremapFixed == 0 {
				continue
			}
			pair := uint64(1)<<uint(op.Region) | uint64(1)<<uint(op.To)
			if m&pair != 0 && m&pair != pair {
				m |= pair
				changed = true
			}
		}
	}
	return m
}
