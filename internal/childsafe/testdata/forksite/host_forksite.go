package bad

// noBranch: the child returns into the parent's code.
func noBranch(m *machine) uintptr {
	pid, _ := rawFork() // want: fork-site
	return pid
}

// twoStatements: the child's branch must be a single entry call.
func twoStatements(m *machine) {
	pid, errno := rawFork()
	if errno == 0 && pid == 0 { // want: fork-site
		m.n = 1
		m.child()
	}
}

// returns: the entry comes back.
func returns(m *machine) {
	pid, _ := rawFork()
	if pid == 0 {
		m.back() // want: fork-site
	}
}

// bare: the fork's result is not kept.
func bare(m *machine) {
	rawFork() // want: fork-site
}

// leavesLoop: the child would loop on in the parent's loop.
func leavesLoop(m *machine) {
	for i := 0; i < 2; i++ {
		pid, _ := rawFork() // want: fork-site
		m.n += int(pid)
	}
}

// unmarkedEntry: the entry is not child code.
func unmarkedEntry(m *machine) {
	pid, _ := rawFork()
	if pid == 0 {
		m.hostExit() // want: unmarked-call
	}
}

func (m *machine) hostExit() { // want: unmarked-call
	sysExit(m.n)
}

// goFork is a fork function with a Go body that is not marked childsafe.
//
//forkfuzz:fork
func goFork() (pid, errno uintptr) { // want: fork-site
	return rawFork()
}
