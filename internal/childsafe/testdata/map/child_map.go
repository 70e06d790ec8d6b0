package bad

//forkfuzz:childsafe
func mapUse(m *machine, k int) int {
	x := map[int]int{}     // want: map
	y := make(map[int]int) // want: map
	y[k] = 1               // want: map
	v := x[k]              // want: map
	for range y {          // want: map
	}
	delete(x, k) // want: map
	return v
}
