package bad

//forkfuzz:childsafe
func panics(m *machine) {
	if m.n < 0 {
		panic(nil) // want: panic
	}
	recover() // want: panic interface
	println() // want: panic
}
