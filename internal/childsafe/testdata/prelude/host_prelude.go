// Package bad is the common part of the analyzer's test cases: a machine
// with a child flag, a fork function, an exit, and a fork site.
package bad

type machine struct {
	inChild bool
	proc    int
	n       int
	name    string
	p       *int
	buf     [64]byte
	words   []uint64
}

var global machine

// forkOne is a well-formed fork site.
func forkOne(m *machine) {
	pid, errno := rawFork()
	if errno == 0 && pid == 0 {
		m.child()
	}
}
