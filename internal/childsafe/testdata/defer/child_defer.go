package bad

//forkfuzz:childsafe
func deferGo(m *machine) {
	defer sysExit(0) // want: defer
	go sysExit(1)    // want: go
}
