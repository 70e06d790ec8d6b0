package bad

//forkfuzz:childsafe
func marked(m *machine) int { return m.n } // want: placement
