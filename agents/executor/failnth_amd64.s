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
