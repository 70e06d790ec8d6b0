package executor

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// With no fork between, the probe says the program's part even when the
// kernel's copy of the counts faults: here the counts land on pages
// never touched (as a stack page first reached at the probe's depth
// would be), and the fault of the copy into before is counted after the
// counts that copy returned. One read of before took that fault for the
// sentinel's (a CI rehearsal's replay said runtime for a failure in
// r0's copy_huge_pmd).
func TestSentinelProbeFreshPages(t *testing.T) {
	old := arena
	arena = prog.ArenaLow
	defer func() { arena = old }()
	m := &machine{}
	if why := m.sentinelArm(); why != "" {
		t.Skipf("no sentinel in the test process: %s", why)
	}
	defer m.sentinelRelease()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := range 8 {
		buf, err := unix.Mmap(-1, 0, 2*prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		m.sentinelTouch()
		before := (*unix.Rusage)(unsafe.Pointer(&buf[0]))
		after := (*unix.Rusage)(unsafe.Pointer(&buf[prog.PageSize]))
		got := m.sentinelProbeWith(before, after)
		b, a := before.Minflt, after.Minflt
		if err := unix.Munmap(buf); err != nil {
			t.Fatal(err)
		}
		if got != obs.PartProgram {
			t.Fatalf("probe %d without a fork: %q, want %q (minor faults %d then %d)", i, got, obs.PartProgram, b, a)
		}
	}
}
