package bad

// host is not child code: an annotation in it means nothing.
func host(m *machine) {
	m.n = 3 /* want: directive */ //forkfuzz:hostonly stale
}
