package bad

//forkfuzz:childsafe
func (m *machine) back() {
	m.n = 2
}
