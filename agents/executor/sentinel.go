package executor

// Where a failed fork stopped: the arena sentinel.
//
// With `arena low` the program's regions lie below the Go runtime's
// memory, so dup_mmap copies them (and the executor binary's image below
// them) before the runtime's heap, stacks and mappings. The failure points
// up to the end of the program's regions are then the same on every run;
// the runtime's are not (its VMAs and page tables change with what the
// runtime did before). A sweep should know which side of that line a
// failure point lies on.
//
// The sentinel is one private anonymous page a page past the low arena's
// end (the gap keeps it from merging with a region), written before a
// fork with fail_nth (after everything else the executor does before it)
// so it is present and writable. Copying it
// write-protects it in the parent (copy_present_pte on a COW mapping).
// After the fork failed, one store to it says whether dup_mmap had got
// that far: a minor fault on this thread (getrusage RUSAGE_THREAD) means
// the sentinel was copied, so the failure struck past the program's
// memory (obs.PartRuntime); no fault means it struck before the sentinel
// (obs.PartProgram: in fork's set-up, the binary's image, the program's
// regions or the sentinel itself, all at fixed addresses).

import (
	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// sentinelAddr is the sentinel page's address (low arena only).
const sentinelAddr = prog.LowArenaBase + prog.MaxRegions*prog.SpanBytes + prog.PageSize

// sentinelArm maps the sentinel if it is not mapped yet in this run. It
// returns "" on success, or why there is no sentinel.
func (m *machine) sentinelArm() string {
	if arena != prog.ArenaLow {
		return "the program's regions are at the top of the address space (arena top), after the runtime's memory"
	}
	if !m.sentinel {
		addr, errno := sysMmap(sentinelAddr, prog.PageSize, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE, -1, 0)
		if errno != 0 || addr != sentinelAddr {
			if errno == 0 {
				sysMunmap(addr, prog.PageSize) // an old kernel ignored MAP_FIXED_NOREPLACE
			}
			return "mapping the sentinel page failed: " + unix.Errno(errno).Error()
		}
		m.sentinel = true
	}
	return ""
}

// sentinelTouch writes the sentinel right before the fork: the stack
// cache's priming forks (stackcache.go) write-protected it, and the store
// makes it writable again, so only the injected fork can write-protect it.
func (m *machine) sentinelTouch() {
	m.sentinelGen++
	store64(sentinelAddr, m.sentinelGen)
}

// sentinelProbe stores to the sentinel after a failed fork and says on
// which side of the program's memory the failure struck.
func (m *machine) sentinelProbe() string {
	var before, after unix.Rusage
	return m.sentinelProbeWith(&before, &after)
}

// sentinelProbeWith is sentinelProbe reading the counts into before and
// after. The count before the store is read twice: the kernel takes a
// thread's counts and then copies them out, and a fault of that copy
// (a stack page not touched yet at this depth) is counted after the
// counts it returned; the second read includes it, and the copy out of
// after can only fault after after's counts were taken.
func (m *machine) sentinelProbeWith(before, after *unix.Rusage) string {
	if unix.Getrusage(unix.RUSAGE_THREAD, before) != nil || unix.Getrusage(unix.RUSAGE_THREAD, before) != nil {
		return ""
	}
	m.sentinelGen++
	store64(sentinelAddr, m.sentinelGen)
	if unix.Getrusage(unix.RUSAGE_THREAD, after) != nil {
		return ""
	}
	if after.Minflt > before.Minflt {
		return obs.PartRuntime
	}
	return obs.PartProgram
}

// sentinelRelease unmaps the sentinel at the end of a run.
func (m *machine) sentinelRelease() {
	if m.sentinel {
		sysMunmap(sentinelAddr, prog.PageSize)
		m.sentinel = false
	}
}
