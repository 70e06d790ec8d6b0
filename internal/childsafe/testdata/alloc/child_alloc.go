package bad

type pair struct{ a, b int }

//forkfuzz:childsafe
func allocs(m *machine, bs []byte) int {
	p := new(int)       // want: alloc
	q := make([]int, 4) // want: alloc
	r := &pair{1, 2}    // want: alloc
	s := []int{1, 2}    // want: alloc
	t := string(bs)     // want: alloc
	return *p + q[0] + r.a + s[0] + len(t)
}
