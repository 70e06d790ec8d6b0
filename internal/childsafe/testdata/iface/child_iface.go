package bad

type shower interface{ show() int }

// take: a marked function with an interface parameter is only bad where
// it is called.
//
//forkfuzz:childsafe
func take(x any) {}

//forkfuzz:childsafe
func ifaces(m *machine, sh shower) int {
	var x any = m.n  // want: interface
	take(m.n)        // want: interface
	n := sh.show()   // want: interface
	_, ok := x.(int) // want: interface
	if ok {
		return n
	}
	return 0
}
