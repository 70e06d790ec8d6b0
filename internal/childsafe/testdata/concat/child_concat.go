package bad

//forkfuzz:childsafe
func concat(a, b string) int {
	c := a + b          // want: concat
	c += a              // want: concat
	return len(c + "x") // want: concat
}
