package executor

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// A fault the handler cannot fill (UFFDIO_ZEROPAGE fails: a memory
// cgroup at its limit, say) must not come back forever: resolve
// unregisters the page, and the retried fault is an ordinary one. Before,
// the wake alone sent the faulting thread into the same fault again, an
// executor hang the replays would have blamed on the kernel.
func TestResolveFailureUnregisters(t *testing.T) {
	fd, e := uffdOpenRaw()
	if e != 0 {
		t.Skipf("no userfaultfd here: %v", unix.Errno(e))
	}
	page, err := unix.Mmap(-1, 0, prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	addr := uintptr(unsafe.Pointer(&page[0]))
	reg := uffdioRegisterArg{rng: uffdioRange{start: uint64(addr), len: prog.PageSize}, mode: uffdioRegisterModeMissing}
	if _, e := sys3(unix.SYS_IOCTL, uintptr(fd), uffdioRegister, uintptr(unsafe.Pointer(&reg))); e != 0 {
		unix.Close(fd)
		unix.Munmap(page)
		t.Skipf("UFFDIO_REGISTER: %v", unix.Errno(e))
	}
	// The fault is the kernel's, in read(2): a goroutine in a system call
	// does not hold up the collector's stop-the-world, while one stuck in
	// a page fault of its own would (and this test's handler is a
	// goroutine of the same process).
	var pfd [2]int
	if err := unix.Pipe(pfd[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd[0])
	defer unix.Close(pfd[1])
	if _, err := unix.Write(pfd[1], []byte{7}); err != nil {
		t.Fatal(err)
	}
	done := make(chan byte, 1)
	go func() {
		if n, err := unix.Read(pfd[0], page[100:101]); n != 1 || err != nil {
			done <- 0
			return
		}
		done <- page[100]
	}()
	finished := false
	defer func() {
		// Closing the userfaultfd releases a thread still waiting (its
		// ranges go); the page is unmapped only once it has read.
		unix.Close(fd)
		if !finished {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				return
			}
		}
		unix.Munmap(page)
	}()
	u := &uffdMiss{failFill: uintptr(unix.ENOMEM)}
	faults := 0
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case v := <-done:
			finished = true
			if v != 7 {
				t.Fatalf("read(2) into the page gave %d, want 7", v)
			}
			if faults != 1 {
				t.Errorf("%d faults reached the handler, want 1", faults)
			}
			return
		default:
		}
		n, err := unix.Read(fd, u.msg[:])
		if err != nil || n != uffdMsgSize {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if u.msg[0] != uffdEventPagefault {
			continue
		}
		faults++
		if faults > 3 {
			break
		}
		u.resolve(fd, uintptr(*(*uint64)(unsafe.Pointer(&u.msg[16]))))
	}
	t.Fatalf("the faulting thread still waits after %d faults its handler could not fill: resolve sent it back into the same fault", faults)
}
