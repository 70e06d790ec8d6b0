package sim

import "sort"

type mutantBit uint

// The catalogued bugs. Each is one bit of a mutantSet.
const (
	_ mutantBit = iota
	MutEagerNoWrprotect
	MutEagerWipeIgnored
	MutEagerDontforkIgnored
	MutCOWReuse
	MutODFZapNoBreak
	MutODFMprotectExclusive
	MutODFBreakRefcount
	MutODFBreakNoWrprotect
	MutODFMremapNoBreak
	MutAsyncMunmapNoSync
	MutAsyncMprotectNoSync
	MutAsyncMadviseNoSync
	MutAsyncMremapNoSync
	MutAsyncMmapNoSync
	MutAsyncSyncPTEOnly
	MutAsyncNoPTL
	MutAsyncRollbackPartial
	MutAsyncKillNoRecover
	MutAsyncNestedFork
	MutAsyncHugeNoWrprotect
	MutAsyncWipeCopied
	MutAsyncRemoteNoSync
	numMutants
)

type mutantSet uint64

func (s mutantSet) has(b mutantBit) bool { return s&(1<<b) != 0 }

// Mutant is a catalogued, deliberately injectable bug.
type Mutant struct {
	Name string
	Mode Mode
	// Desc is one line: what the implementation gets wrong.
	Desc string
	// Needs says what a program must do to expose it, for the benchmark
	// ("fail" means it only shows with injected allocation failures).
	Needs string
	bit   mutantBit
}

var mutants = []Mutant{
	{"eager-no-wrprotect", Eager, "fork copies private PTEs without write-protecting them: later writes land in pages parent and child still share", "", MutEagerNoWrprotect},
	{"eager-wipeonfork-ignored", Eager, "fork copies the page tables of MADV_WIPEONFORK areas: the child sees the parent's data instead of zeros", "", MutEagerWipeIgnored},
	{"eager-dontfork-ignored", Eager, "fork duplicates MADV_DONTFORK areas into the child", "", MutEagerDontforkIgnored},
	{"eager-cow-reuse", Eager, "the copy-on-write fault reuses an anonymous page still mapped twice (refcount check off by one)", "", MutCOWReuse},
	{"odf-zap-nobreak", OnDemand, "munmap/MADV_DONTNEED/MAP_FIXED zap PTEs inside a COW-shared PTE table without breaking it: the other process loses its pages", "", MutODFZapNoBreak},
	{"odf-mprotect-exclusive", OnDemand, "mprotect takes a COW-shared PTE table as its own (sets the PMD writable) without copying it", "", MutODFMprotectExclusive},
	{"odf-break-refcount", OnDemand, "the table-break path treats a table shared by two mms as exclusive (refcount check off by one)", "", MutODFBreakRefcount},
	{"odf-break-no-wrprotect", OnDemand, "copying a shared PTE table takes page references but does not write-protect private PTEs", "", MutODFBreakNoWrprotect},
	{"odf-mremap-nobreak", OnDemand, "mremap moves PTEs out of a COW-shared PTE table without breaking it first", "", MutODFMremapNoBreak},
	{"async-munmap-nosync", Async, "munmap does no proactive VMA synchronization: the parent zaps PTEs the child has not copied yet", "", MutAsyncMunmapNoSync},
	{"async-mprotect-nosync", Async, "mprotect does no proactive VMA synchronization and rewrites the PMD entries it touches with the new protection, dropping the not-yet-copied RW marker", "", MutAsyncMprotectNoSync},
	{"async-madvise-nosync", Async, "madvise (DONTNEED...) does no proactive VMA synchronization", "", MutAsyncMadviseNoSync},
	{"async-mremap-nosync", Async, "mremap does no proactive VMA synchronization: pages move away before the child copied them", "", MutAsyncMremapNoSync},
	{"async-mmap-nosync", Async, "MAP_FIXED mmap over an existing VMA does no proactive VMA synchronization", "", MutAsyncMmapNoSync},
	{"async-sync-pte-only", Async, "the PMD-level sync on a write fault copies only the touched PTE, not the whole PTE table, then sets RW", "", MutAsyncSyncPTEOnly},
	{"async-no-ptl", Async, "parent sync and child copier do not take the PTE-table lock: the copier can copy a table the parent is changing", "", MutAsyncNoPTL},
	{"async-rollback-partial", Async, "on an allocation failure the rollback restores RW only on the PMDs of the VMA being copied", "fail", MutAsyncRollbackPartial},
	{"async-kill-norecover", Async, "a child killed while its copy runs aborts the copy without restoring the parent's PMD RW bits", "", MutAsyncKillNoRecover},
	{"async-nested-fork", Async, "a fork while an earlier async copy is still running does not complete it first", "", MutAsyncNestedFork},
	{"async-huge-no-wrprotect", Async, "the background copy shares a huge PMD without write-protecting it in the parent", "", MutAsyncHugeNoWrprotect},
	{"async-wipeonfork-copied", Async, "the whole-VMA/whole-PMD copy ignores MADV_WIPEONFORK and copies those pages to the child", "", MutAsyncWipeCopied},
	{"async-remote-nosync", Async, "a GUP write into a child still being copied (/proc/PID/mem, process_vm_writev) faults in a fresh table that the copier then overwrites: the write is lost", "procmem", MutAsyncRemoteNoSync},
}

// Mutants returns the catalogue, for all modes, sorted by mode then name.
func Mutants() []Mutant {
	out := append([]Mutant(nil), mutants...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Mode != out[j].Mode {
			return out[i].Mode < out[j].Mode
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// MutantsFor returns the mutants of one fork implementation.
func MutantsFor(m Mode) []Mutant {
	var out []Mutant
	for _, x := range Mutants() {
		if x.Mode == m {
			out = append(out, x)
		}
	}
	return out
}

// LookupMutant finds a mutant by name.
func LookupMutant(name string) (Mutant, bool) {
	for _, m := range mutants {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}
