package executor

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// What the VMA operations of fuzz/prog/vmaops.go need from the kernel,
// found out once per executor (before any fork, so child_vmaops.go only
// reads it). An operation the kernel cannot do is skipped with the reason
// (obs.SkipNoMempolicy, SkipNoAnonName, SkipNoPMadvise) instead of an
// errno the model would have to guess.

// mbindErrno is what mbind(MPOL_BIND, {0}) of a scratch page answers (0:
// policies naming node 0 apply; ENOSYS without NUMA, EINVAL when node 0
// has no memory or the executor's cpuset excludes it).
var mbindErrno = probeMbind()

// anonNameErrno is what PR_SET_VMA_ANON_NAME answers on an anonymous
// page (0: the kernel names VMAs; EINVAL: no CONFIG_ANON_VMA_NAME).
var anonNameErrno = probeAnonName()

// pmadviseErrno is what process_madvise(MADV_COLD) of the executor's own
// page answers through a pidfd (0: available).
var pmadviseErrno = probePMadvise()

// anonNames holds, per prog.AnonName, its NUL-terminated name (nil for
// AnonNone: a NULL pointer removes the name).
var anonNames = func() [prog.NumAnonNames][]byte {
	var out [prog.NumAnonNames][]byte
	for n := range out {
		if s := prog.AnonName(n).Info().Linux; s != "" {
			out[n] = append([]byte(s), 0)
		}
	}
	return out
}()

// probePage maps one scratch anonymous page for a probe.
func probePage() (uintptr, func(), uintptr) {
	b, err := unix.Mmap(-1, 0, prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, func() {}, uintptr(unix.ENOMEM)
	}
	return uintptr(unsafe.Pointer(&b[0])), func() { unix.Munmap(b) }, 0
}

func probeAnonName() uintptr {
	a, done, e := probePage()
	defer done()
	if e != 0 {
		return e
	}
	_, e = anonNameSys(a, prog.PageSize, anonNames[prog.AnonA])
	return e
}

func probePMadvise() uintptr {
	a, done, e := probePage()
	defer done()
	if e != 0 {
		return e
	}
	var iov [2]uint64
	_, e = pmadviseSys(&iov, a, prog.PageSize, unix.MADV_COLD)
	return e
}

func probeMbind() uintptr {
	a, done, e := probePage()
	defer done()
	if e != 0 {
		return e
	}
	_, e = mbindSys(a, prog.PageSize, prog.PolicyBind.Info().Value, true)
	return e
}
