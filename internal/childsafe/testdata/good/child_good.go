package bad

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Everything here is allowed in child code.

//forkfuzz:childsafe
func (m *machine) run(f int) {
	m.n = f + 1
	m.buf[0] = byte(m.n)
	b := m.buf[:8]
	w := (*uint32)(unsafe.Pointer(&m.buf[8]))
	for atomic.LoadUint32(w) == 0 {
		rawSyscall(202, uintptr(unsafe.Pointer(w)))
	}
	s := "local"
	s = m.name[:1]
	_ = s
	copy(b, m.buf[16:24])
	ev := m.n > 0 && !m.inChild
	if ev {
		m.name = fmt.Sprint(f) // host code: guarded
	}
	if !m.inChild && m.proc == 0 {
		m.words = append(m.words, 1)
	}
	if m.inChild {
		rawSyscall(0, 0)
	} else {
		m.name = "parent"
	}
	if m.n < 0 { //forkfuzz:hostonly a negative n never reaches a child (the validator says so)
		m.name = fmt.Sprint(m.n)
	}
	//forkfuzz:hostonly the main process only (test)
	m.words = append(m.words, 2)
	if !m.inChild && m.hostThing() {
		m.n++
	}
	m.tail()
	sysExit(0)
}

//forkfuzz:childsafe
func (m *machine) tail() {
	if m.inChild || m.n == 0 {
		return
	}
	m.name = fmt.Sprint(m.n)
}
