package prog

import "fmt"

// Arena says where a program's regions really live in the executing
// process. Observations, the reference model and every report use the
// canonical addresses (region rI at Base(I), above ArenaBase) whatever the
// placement: the executor maps a real address back with Canonical before it
// reports one.
//
// The placement changes what the kernel does: dup_mmap copies VMAs in
// address order, and Go's heap lies below ArenaBase in almost every run, so
// with ArenaTop fork copies the runtime's memory first and the program's
// last. ArenaLow puts the regions below the heap, so fork reaches them
// first: a page moving between NUMA nodes right before the fork call is
// still in flight when fork copies its table, and fail_nth counts the
// program's failure points before the runtime's, which shift from run to
// run (docs/rollback.md).
type Arena uint8

const (
	ArenaTop Arena = iota // at ArenaBase (63 TiB), above the Go heap
	ArenaLow              // at LowArenaBase (256 GiB), below it
	numArenas
)

// LowArenaBase is where region r0 starts in a program that says "arena low".
const LowArenaBase = 0x4000000000

var arenaNames = [numArenas]string{"top", "low"}

func (a Arena) String() string {
	if a < numArenas {
		return arenaNames[a]
	}
	return fmt.Sprintf("Arena(%d)", uint8(a))
}

// Base returns the real address of region r0 under placement a.
func (a Arena) Base() uint64 {
	if a == ArenaLow {
		return LowArenaBase
	}
	return ArenaBase
}

// End returns the real end of the arena under placement a.
func (a Arena) End() uint64 { return a.Base() + MaxRegions*SpanBytes }

// RegionBase returns the real address of region i under placement a.
func (a Arena) RegionBase(i int) uint64 { return a.Base() + uint64(i)*SpanBytes }

// Canonical maps a real address under placement a to the address
// observations use; an address outside the arena is returned unchanged.
func (a Arena) Canonical(addr uint64) uint64 {
	if b := a.Base(); b != ArenaBase && addr >= b && addr < a.End() {
		return addr - b + ArenaBase
	}
	return addr
}

// InArena says whether a canonical address lies inside the arena.
func InArena(addr uint64) bool { return addr >= ArenaBase && addr < ArenaBase+MaxRegions*SpanBytes }

// Real maps a canonical arena address to the real one under placement a;
// an address outside the canonical arena is returned unchanged.
func (a Arena) Real(addr uint64) uint64 {
	if b := a.Base(); b != ArenaBase && InArena(addr) {
		return addr - ArenaBase + b
	}
	return addr
}
