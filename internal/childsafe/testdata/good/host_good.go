package bad

import "fmt"

func (m *machine) hostThing() bool { return len(fmt.Sprint(m.n)) > 0 }

// forkRun forks a child that runs m.run.
func forkRun(m *machine) {
	for i := 0; i < 2; i++ {
		pid, errno := rawFork()
		if errno != 0 {
			break
		}
		if pid == 0 {
			m.run(i)
		}
	}
}
