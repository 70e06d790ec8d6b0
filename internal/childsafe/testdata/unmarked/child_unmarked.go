package bad

import (
	"math/bits"
	"os"
)

//forkfuzz:childsafe
func callsUnmarked(m *machine) int {
	a := helper(m)               // want: unmarked-call
	b := os.Getpid()             // want: host-package
	c := bits.OnesCount(uint(a)) // want: not-allowed
	return a + b + c
}
