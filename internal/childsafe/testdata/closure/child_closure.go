package bad

//forkfuzz:childsafe
func closures(m *machine, f func() int) int {
	n := 1
	g := func() int { return n } // want: closure
	h := m.getN                  // want: funcvalue
	return f() + g() + h()       // want: funcvalue
}

//forkfuzz:childsafe
func (m *machine) getN() int { return m.n }
