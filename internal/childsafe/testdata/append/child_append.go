package bad

//forkfuzz:childsafe
func appendTo(m *machine) {
	b := m.buf[:0]
	b = append(b, 'x') // want: append
	m.buf[0] = b[0]
}
