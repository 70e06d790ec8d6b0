// Raw system calls and memory access for the executor. Everything here is
// NOSPLIT and touches no Go runtime state, so forked children (which must
// not enter the runtime) can call it. See child_sys.go.

#include "textflag.h"

// func rawSyscall6(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1, errno uintptr)
TEXT ·rawSyscall6(SB), NOSPLIT, $0-72
	MOVQ	trap+0(FP), AX
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	MOVQ	a4+32(FP), R10
	MOVQ	a5+40(FP), R8
	MOVQ	a6+48(FP), R9
	SYSCALL
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$-1, r1+56(FP)
	MOVQ	AX, errno+64(FP)
	RET
ok:
	MOVQ	AX, r1+56(FP)
	MOVQ	$0, errno+64(FP)
	RET

// func rawFork() (pid, errno uintptr)
// clone(SIGCHLD) = fork. In the child, reset the goroutine's stack guard
// (g.stackguard0 at offset 16, g.stack.lo at offset 0) so that a pending
// preemption request copied from the parent cannot send the child's next
// function prologue into the scheduler.
TEXT ·rawFork(SB), NOSPLIT, $0-16
	MOVQ	$56, AX          // SYS_clone
	MOVQ	$17, DI          // SIGCHLD
	XORQ	SI, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	XORQ	R9, R9
	SYSCALL
	CMPQ	AX, $0xfffffffffffff001
	JLS	forked
	NEGQ	AX
	MOVQ	$-1, pid+0(FP)
	MOVQ	AX, errno+8(FP)
	RET
forked:
	CMPQ	AX, $0
	JNE	parent
	MOVQ	(TLS), CX        // g
	MOVQ	0(CX), BX        // g.stack.lo
	ADDQ	$4096, BX
	MOVQ	BX, 16(CX)       // g.stackguard0
parent:
	MOVQ	AX, pid+0(FP)
	MOVQ	$0, errno+8(FP)
	RET

// func load64(addr uintptr) uint64
TEXT ·load64(SB), NOSPLIT, $0-16
	MOVQ	addr+0(FP), AX
	MOVQ	0(AX), AX
	MOVQ	AX, ret+8(FP)
	RET

// func store64(addr uintptr, v uint64)
TEXT ·store64(SB), NOSPLIT, $0-16
	MOVQ	addr+0(FP), AX
	MOVQ	v+8(FP), BX
	MOVQ	BX, 0(AX)
	RET

// func copyPage(dst *[512]uint64, addr uintptr)
// Reads one 4 KiB page with plain loads.
TEXT ·copyPage(SB), NOSPLIT, $0-16
	MOVQ	dst+0(FP), DI
	MOVQ	addr+8(FP), SI
	MOVQ	$512, CX
	CLD
	REP; MOVSQ
	RET

// func scanPage(dst *[512]uint64, addr uintptr) (mask uint64)
// Reads one 4 KiB page with plain loads, 64 bytes at a time: bit b of
// mask is set when words 8b..8b+7 are not all zero, and only those blocks
// are read again and copied to dst (the rest of dst is left as it was).
// Most pages a view reads are sparse: under TCG every guest instruction
// counts, and a REP MOVSQ of the whole page plus a scan of the copy cost
// about three times the instructions.
TEXT ·scanPage(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	addr+8(FP), SI
	MOVQ	$64, DX
	MOVQ	$1, R13
	XORQ	R8, R8
scanloop:
	MOVQ	0(SI), AX
	ORQ	8(SI), AX
	ORQ	16(SI), AX
	ORQ	24(SI), AX
	ORQ	32(SI), AX
	ORQ	40(SI), AX
	ORQ	48(SI), AX
	ORQ	56(SI), AX
	TESTQ	AX, AX
	JZ	scannext
	MOVQ	0(SI), BX
	MOVQ	BX, 0(DI)
	MOVQ	8(SI), BX
	MOVQ	BX, 8(DI)
	MOVQ	16(SI), BX
	MOVQ	BX, 16(DI)
	MOVQ	24(SI), BX
	MOVQ	BX, 24(DI)
	MOVQ	32(SI), BX
	MOVQ	BX, 32(DI)
	MOVQ	40(SI), BX
	MOVQ	BX, 40(DI)
	MOVQ	48(SI), BX
	MOVQ	BX, 48(DI)
	MOVQ	56(SI), BX
	MOVQ	BX, 56(DI)
	ORQ	R13, R8
scannext:
	ADDQ	$64, SI
	ADDQ	$64, DI
	SHLQ	$1, R13
	DECQ	DX
	JNZ	scanloop
	MOVQ	R8, mask+16(FP)
	RET

// func rdtscp() uint64
// A timestamp ordered after every earlier instruction of this thread
// (RDTSCP waits for them) and before every later one (LFENCE).
TEXT ·rdtscp(SB), NOSPLIT, $0-8
	RDTSCP
	LFENCE
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	AX, ret+0(FP)
	RET

// func storeTimed(addr uintptr, v uint64) (inv, resp uint64)
// A plain store bracketed by fenced timestamps: inv is taken before the
// store issues, resp after it is globally visible (MFENCE), so a thread's
// own stores never share or swap times.
TEXT ·storeTimed(SB), NOSPLIT, $0-32
	RDTSCP
	LFENCE
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	AX, R8
	MOVQ	addr+0(FP), BX
	MOVQ	v+8(FP), CX
	MOVQ	CX, 0(BX)
	MFENCE
	RDTSCP
	LFENCE
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	R8, inv+16(FP)
	MOVQ	AX, resp+24(FP)
	RET
