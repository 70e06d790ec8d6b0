// The rollback write pass (failnth.go).

#include "textflag.h"

// func orZero(addr uintptr)
// An atomic "or 0" on the 8 bytes at addr: a write access that keeps the
// value, so it neither loses a concurrent thread's store nor changes
// content, yet takes a write fault wherever the page is not writable in
// the page tables (copy-on-write, or a PMD left write-protected).
TEXT ·orZero(SB), NOSPLIT, $0-8
	MOVQ	addr+0(FP), AX
	LOCK
	ORQ	$0, (AX)
	RET

// func rawForkInjected(a *injectArgs) (pid, errno, backN, armErr uintptr)
// The injected fork with nothing in between that could touch memory: arm
// the memory cgroup limit (pwrite memory.max) and fail-nth (write K),
// clone(SIGCHLD), and in the parent read fail-nth back into a MAP_SHARED
// buffer, reset it to 0 and lift the limit, all before the first store to
// the stack: fork write-protected the stack, so a store there would take a
// copy-on-write fault whose page allocation could consume the fault (or,
// under the memory limit, never be charged). The child resets its stack
// guard like rawFork. injectArgs layout: see failnth.go. With a
// child-arm buffer (childfail) the parent arms the child right after
// clone, before its own first store.
TEXT ·rawForkInjected(SB), NOSPLIT, $0-40
	MOVQ	a+0(FP), R12
	XORQ	R15, R15
	MOVQ	48(R12), DI      // memFd
	CMPQ	DI, $0
	JLT	noarm
	MOVQ	$18, AX          // SYS_pwrite64
	MOVQ	56(R12), SI
	MOVQ	64(R12), DX
	XORQ	R10, R10
	SYSCALL
	CMPQ	AX, $0xfffffffffffff001
	JLS	noarm
	MOVQ	AX, R15          // -errno
noarm:
	MOVQ	0(R12), DI       // failFd
	CMPQ	DI, $0
	JLT	nofail
	MOVQ	$1, AX           // SYS_write
	MOVQ	8(R12), SI
	MOVQ	16(R12), DX
	SYSCALL
nofail:
	MOVQ	$56, AX          // SYS_clone
	MOVQ	$17, DI          // SIGCHLD
	XORQ	SI, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	XORQ	R9, R9
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	MOVQ	AX, R13
	XORQ	R14, R14
	// childfail (childfail.go): arm the child before anything can block
	// this thread. BX: the child-arm buffer (MAP_SHARED, layout in
	// childfail.go): SIGSTOP the child, read /proc/PID/schedstat, open
	// /proc/PID/fail-nth and write K (kbuf, klen) into it.
	MOVQ	80(R12), BX
	CMPQ	BX, $0
	JEQ	nochild
	CMPQ	R13, $0xfffffffffffff001
	JCC	nochild          // clone failed: no child
	MOVQ	$62, AX          // SYS_kill
	MOVQ	R13, DI
	MOVQ	$19, SI          // SIGSTOP
	SYSCALL
	MOVQ	AX, 40(BX)
	// "/proc/" is at 0; the pid's digits, built backwards ending at 248.
	MOVQ	R13, AX
	LEAQ	248(BX), DI
digit:
	XORQ	DX, DX
	MOVQ	$10, CX
	DIVQ	CX
	ADDQ	$48, DX
	DECQ	DI
	MOVB	DL, (DI)
	TESTQ	AX, AX
	JNZ	digit
	LEAQ	6(BX), R8
	LEAQ	248(BX), SI
cpdigit:
	MOVB	(DI), DX
	MOVB	DX, (R8)
	INCQ	DI
	INCQ	R8
	CMPQ	DI, SI
	JLT	cpdigit
	MOVQ	R8, R9           // end of "/proc/PID"
	LEAQ	192(BX), SI      // "/schedstat\0"
	MOVQ	$11, CX
cpstat:
	MOVB	(SI), DX
	MOVB	DX, (R8)
	INCQ	SI
	INCQ	R8
	DECQ	CX
	JNZ	cpstat
	MOVQ	$257, AX         // SYS_openat
	MOVQ	$-100, DI        // AT_FDCWD
	MOVQ	BX, SI
	MOVQ	$0x80000, DX     // O_RDONLY|O_CLOEXEC
	XORQ	R10, R10
	SYSCALL
	CMPQ	AX, $0xfffffffffffff001
	JCC	nostat
	MOVQ	AX, R8
	XORQ	AX, AX           // SYS_read
	MOVQ	R8, DI
	LEAQ	64(BX), SI
	MOVQ	$127, DX
	SYSCALL
	MOVQ	$3, AX           // SYS_close
	MOVQ	R8, DI
	SYSCALL
nostat:
	MOVQ	R9, R8
	LEAQ	208(BX), SI      // "/fail-nth\0"
	MOVQ	$10, CX
cpnth:
	MOVB	(SI), DX
	MOVB	DX, (R8)
	INCQ	SI
	INCQ	R8
	DECQ	CX
	JNZ	cpnth
	MOVQ	$257, AX         // SYS_openat
	MOVQ	$-100, DI
	MOVQ	BX, SI
	MOVQ	$0x80002, DX     // O_RDWR|O_CLOEXEC
	XORQ	R10, R10
	SYSCALL
	MOVQ	AX, 48(BX)
	CMPQ	AX, $0xfffffffffffff001
	JCC	nochild
	MOVQ	AX, DI
	MOVQ	$1, AX           // SYS_write
	MOVQ	8(R12), SI
	MOVQ	16(R12), DX
	SYSCALL
	MOVQ	AX, 56(BX)
nochild:
	MOVQ	0(R12), DI
	CMPQ	DI, $0
	JLT	nolift0
	MOVQ	$17, AX          // SYS_pread64
	MOVQ	24(R12), SI
	MOVQ	32(R12), DX
	XORQ	R10, R10
	SYSCALL
	MOVQ	AX, R14
	MOVQ	0(R12), DI
	MOVQ	$1, AX           // SYS_write "0"
	MOVQ	40(R12), SI
	MOVQ	$1, DX
	SYSCALL
nolift0:
	MOVQ	48(R12), DI
	CMPQ	DI, $0
	JLT	results
	MOVQ	$18, AX          // SYS_pwrite64 "max"
	MOVQ	72(R12), SI
	MOVQ	$3, DX
	XORQ	R10, R10
	SYSCALL
results:
	MOVQ	R14, backN+24(FP)
	MOVQ	R15, armErr+32(FP)
	MOVQ	R13, AX
	CMPQ	AX, $0xfffffffffffff001
	JLS	okpid
	NEGQ	AX
	MOVQ	$-1, pid+8(FP)
	MOVQ	AX, errno+16(FP)
	RET
okpid:
	MOVQ	AX, pid+8(FP)
	MOVQ	$0, errno+16(FP)
	RET
child:
	MOVQ	(TLS), CX        // g
	MOVQ	0(CX), BX        // g.stack.lo
	ADDQ	$4096, BX
	MOVQ	BX, 16(CX)       // g.stackguard0
	MOVQ	$0, pid+8(FP)
	MOVQ	$0, errno+16(FP)
	MOVQ	$0, backN+24(FP)
	MOVQ	$0, armErr+32(FP)
	RET

// func rawWatchdogThread(stack uintptr, flag *[2]uint32, deadline *[2]int64, msg *byte, n int, ctid *uint32) (tid, errno uintptr)
// Starts a thread the Go runtime knows nothing about (a raw clone on the
// given stack top). The thread sets flag[1] (it is waiting), then waits
// until flag[0] is non-zero or the absolute CLOCK_MONOTONIC deadline
// passes; then, if flag[0] is still zero, it writes msg to stderr and ends
// the process with status 71; else it exits, and the kernel clears *ctid
// and wakes it. Only raw system calls: it must fire even when the Go
// runtime is stuck (a stop-the-world waiting for a thread that faults
// forever). A
// goroutine blocked in a raw futex would hold its P and stall every
// stop-the-world (a GC started by a writer thread then waits forever);
// this thread cannot. The caller blocks all signals around the call, so
// the thread never takes one.
TEXT ·rawWatchdogThread(SB), NOSPLIT, $0-64
	MOVQ	flag+8(FP), R12
	MOVQ	deadline+16(FP), R13
	MOVQ	msg+24(FP), R14
	MOVQ	n+32(FP), R15
	MOVQ	$56, AX          // SYS_clone
	MOVQ	$0x01250f00, DI  // VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|CHILD_CLEARTID|CHILD_SETTID
	MOVQ	stack+0(FP), SI
	XORQ	DX, DX
	MOVQ	ctid+40(FP), R10
	XORQ	R8, R8
	SYSCALL
	CMPQ	AX, $0
	JEQ	wthread
	CMPQ	AX, $0xfffffffffffff001
	JLS	wok
	NEGQ	AX
	MOVQ	$0, tid+48(FP)
	MOVQ	AX, errno+56(FP)
	RET
wok:
	MOVQ	AX, tid+48(FP)
	MOVQ	$0, errno+56(FP)
	RET
wthread:
	MOVL	$1, 4(R12)       // flag[1]: the watchdog is waiting
wwait:
	MOVL	(R12), AX
	CMPL	AX, $0
	JNE	wdone
	MOVQ	$202, AX         // SYS_futex
	MOVQ	R12, DI
	MOVQ	$137, SI         // FUTEX_WAIT_BITSET|FUTEX_PRIVATE_FLAG: absolute timeout
	XORQ	DX, DX
	MOVQ	R13, R10
	XORQ	R8, R8
	MOVQ	$0xffffffff, R9
	SYSCALL
	CMPQ	AX, $-110        // ETIMEDOUT
	JNE	wwait
	MOVL	(R12), AX
	CMPL	AX, $0
	JNE	wdone
	MOVQ	$1, AX           // SYS_write
	MOVQ	$2, DI
	MOVQ	R14, SI
	MOVQ	R15, DX
	SYSCALL
	MOVQ	$231, AX         // SYS_exit_group
	MOVQ	$71, DI
	SYSCALL
wdone:
	MOVQ	$60, AX          // SYS_exit: this thread only
	XORQ	DI, DI
	SYSCALL
	JMP	wdone

// func rawClone3(args *cloneArgs, size uintptr) (pid, errno uintptr)
// A fork through clone3 (child_oom: CLONE_INTO_CGROUP puts the child in
// its own memory cgroup from birth). The child resets its stack guard
// like rawFork.
TEXT ·rawClone3(SB), NOSPLIT, $0-32
	MOVQ	args+0(FP), DI
	MOVQ	size+8(FP), SI
	MOVQ	$435, AX         // SYS_clone3
	SYSCALL
	CMPQ	AX, $0
	JEQ	c3child
	CMPQ	AX, $0xfffffffffffff001
	JLS	c3ok
	NEGQ	AX
	MOVQ	$-1, pid+16(FP)
	MOVQ	AX, errno+24(FP)
	RET
c3ok:
	MOVQ	AX, pid+16(FP)
	MOVQ	$0, errno+24(FP)
	RET
c3child:
	MOVQ	(TLS), CX        // g
	MOVQ	0(CX), BX        // g.stack.lo
	ADDQ	$4096, BX
	MOVQ	BX, 16(CX)       // g.stackguard0
	MOVQ	$0, pid+16(FP)
	MOVQ	$0, errno+24(FP)
	RET
