package bad

// rawFork stands for the assembly fork.
//
//forkfuzz:fork
//forkfuzz:childsafe
func rawFork() (pid, errno uintptr)

//forkfuzz:childsafe
func rawSyscall(trap, a1 uintptr) uintptr

//forkfuzz:childsafe
func sysExit(code int) {
	for {
		rawSyscall(231, uintptr(code))
	}
}

//forkfuzz:childsafe
func (m *machine) child() {
	m.inChild = true
	m.proc = 1
	sysExit(0)
}
