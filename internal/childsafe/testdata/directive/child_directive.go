package bad

//forkfuzz:childsafe
func annotated(m *machine) {
	/* want: directive */ //forkfuzz:hostonly
	m.n = 1
	/* want: directive */ //forkfuzz:childsafe-typo
	m.n = 2
}
