package bad

//forkfuzz:childsafe
func chans(ch chan int) int {
	ch <- 1  // want: chan
	select { // want: chan
	default:
	}
	close(ch)   // want: chan
	return <-ch // want: chan
}
