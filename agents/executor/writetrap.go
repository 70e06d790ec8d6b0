package executor

// The rollback write pass (a write to every resident writable page,
// counting faults) and the test-only trap that makes it hang (split from
// failnth.go).

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// writePass writes (atomic or 0) one word of every resident writable
// arena page that is not a private file mapping (a write there would replace the
// page-cache page by a private copy and change what later file writes
// show), counting the forking thread's minor faults. A pass that does not
// finish within writeTimeout means a write fault that never resolves: the
// watchdog says so on stderr (the console, in a VM) and ends the executor
// with status 71, which the caller sees as a crash of this program.
func (m *machine) writePass(rb *obs.Rollback, when string) (faults int64, pages int, nanos int64) {
	if m.readMaps() != 0 {
		return 0, 0, 0
	}
	stop := m.startWatchdog(fmt.Sprintf("forkfuzz executor: rollback:write-hang: the write pass %s fork f%d (fail_nth=%d, injection %q) has not finished after %v: a write fault that never resolves (a PMD left write-protected?)\n",
		when, rb.Fork, rb.FailNth, rb.Injection, writeTimeout))
	defer stop()
	var ru0, ru1 unix.Rusage
	t0 := time.Now()
	unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		if v.end <= arena.Base() || v.start >= arena.End() || v.prot&obs.VMAWrite == 0 {
			continue
		}
		if v.inode != 0 && v.prot&obs.VMAShared == 0 {
			continue // private file mapping
		}
		lo, hi := max(v.start, arena.Base()), min(v.end, arena.End())
		// Only resident pages (mincore): the pass must not populate
		// memory the program never touched, and a PMD without resident
		// pages under it has no PTE table to leave write-protected.
		n := int((hi - lo) / prog.PageSize)
		if cap(m.rb.resident) < n {
			m.rb.resident = make([]byte, n)
		}
		res := m.rb.resident[:n]
		if _, e := sys3(unix.SYS_MINCORE, uintptr(lo), uintptr(hi-lo), uintptr(unsafe.Pointer(&res[0]))); e != 0 {
			for j := range res {
				res[j] = 1
			}
		}
		for addr := lo; addr < hi; addr += prog.PageSize {
			if res[(addr-lo)/prog.PageSize]&1 == 0 || m.pageState(&v, addr) != obs.Readable {
				continue
			}
			orZero(uintptr(addr))
			pages++
		}
	}
	unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
	return ru1.Minflt - ru0.Minflt, pages, time.Since(t0).Nanoseconds()
}

func orZero(addr uintptr)

// trapFirstPage makes writes to the first page of the first anonymous
// private arena mapping block forever: a userfaultfd write-protection
// that nobody resolves (reads still work), much like a PMD left
// write-protected whose faults never resolve. Test-only
// (rollback-write-hang); failures are events.
func (m *machine) trapFirstPage() {
	const (
		sysUserfaultfd   = 323
		uffdUserModeOnly = 1
		uffdioAPI        = 0xc018aa3f
		uffdioRegister   = 0xc020aa00
		uffdioWP         = 0xc018aa06
		modeWP           = 2 // UFFDIO_REGISTER_MODE_WP
		wpModeWP         = 1 // UFFDIO_WRITEPROTECT_MODE_WP
	)
	if m.readMaps() != 0 {
		return
	}
	fail := func(what string, e error) {
		m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "rollback-write-hang: %s: %v", what, e))
	}
	for i := 0; i < m.nvma; i++ {
		v := m.vmas[i]
		if v.start < arena.Base() || v.start >= arena.End() || v.inode != 0 || v.prot&obs.VMAShared != 0 || v.prot&obs.VMAWrite == 0 {
			continue
		}
		fd, _, e := unix.Syscall(sysUserfaultfd, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)
		if e != 0 {
			fd, _, e = unix.Syscall(sysUserfaultfd, unix.O_CLOEXEC, 0, 0)
		}
		if e != 0 {
			fail("userfaultfd", e)
			return
		}
		api := [3]uint64{0xAA, 0, 0}
		reg := [4]uint64{v.start, prog.PageSize, modeWP, 0}
		wp := [3]uint64{v.start, prog.PageSize, wpModeWP}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api[0]))); e != 0 {
			fail("UFFDIO_API", e)
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioRegister, uintptr(unsafe.Pointer(&reg[0]))); e != 0 {
			fail("UFFDIO_REGISTER (write-protect mode)", e)
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, uffdioWP, uintptr(unsafe.Pointer(&wp[0]))); e != 0 {
			fail("UFFDIO_WRITEPROTECT", e)
			return
		}
		return // fd stays open: the executor is about to be ended by the watchdog
	}
	m.rb.events = append(m.rb.events, obs.NewEvent(obs.EvMeasureUnavailable, "rollback-write-hang: no anonymous private mapping to trap"))
}
