package bad

//forkfuzz:childsafe
func ptrWrites(m *machine, x *int, s string) {
	m.name = s   // want: pointer-write
	global.p = x // want: pointer-write
	local := machine{}
	local.name = s
	local.p = x
	m.n = len(s)
	m.words[0] = 1
}
