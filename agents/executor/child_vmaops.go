package executor

import (
	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The VMA operations of fuzz/prog/vmaops.go, as the main process, its
// threads and its children run them. Raw system calls only (doc.go).

// vmaOp runs operation op (of kind mlockonfault, mbind, anonname,
// pmadvise or remapfile) at addr. skip is the obs.Skip code when the kernel cannot do
// it (found out once: vmaops.go), with the errno that says why.
//
//forkfuzz:childsafe
func (m *machine) vmaOp(op *prog.Op, addr uintptr) (errno uintptr, ret uint64, skip int) {
	switch op.Kind {
	case prog.OpMlockOnfault:
		_, errno = sys3(unix.SYS_MLOCK2, addr, uintptr(op.Len), mlockOnfault)
	case prog.OpMbind:
		d := op.Policy.Info()
		if d.Value < 0 {
			return uintptr(unix.EINVAL), 0, obs.SkipUnhandled
		}
		if mbindErrno != 0 {
			return mbindErrno, 0, obs.SkipNoMempolicy
		}
		_, errno = mbindSys(addr, uintptr(op.Len), d.Value, d.Node0)
	case prog.OpAnonName:
		if int(op.Name) >= len(anonNames) {
			return uintptr(unix.EINVAL), 0, obs.SkipUnhandled
		}
		if anonNameErrno != 0 {
			return anonNameErrno, 0, obs.SkipNoAnonName
		}
		_, errno = anonNameSys(addr, uintptr(op.Len), anonNames[op.Name])
	case prog.OpPMadvise:
		adv := op.Advice.Info().Value
		if adv < 0 || !prog.PMadviseAdvice(op.Advice) {
			return uintptr(unix.EINVAL), 0, obs.SkipUnhandled
		}
		if pmadviseErrno != 0 {
			return pmadviseErrno, 0, obs.SkipNoPMadvise
		}
		var iov [2]uint64
		var n uintptr
		n, errno = pmadviseSys(&iov, addr, uintptr(op.Len), adv)
		if errno == 0 {
			ret = uint64(n)
		}
	case prog.OpRemapFile:
		_, errno = remapFileSys(addr, uintptr(op.Len), uintptr(op.PgOff))
	default:
		return uintptr(unix.ENOSYS), 0, obs.SkipUnhandled
	}
	return errno, ret, 0
}
