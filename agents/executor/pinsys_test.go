package executor

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const pinPage = 4096

// TestPinABILayout checks the hand-written kernel structs and ioctl numbers
// against the values of the kernel headers (offsetof/sizeof and the
// expanded _IOWR/_IOR macros, as printed by a C program compiled against
// linux-libc-dev's include/uapi headers).
func TestPinABILayout(t *testing.T) {
	var sqe ioUringSqe
	var p ioUringParams
	checks := []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(io_uring_params)", unsafe.Sizeof(p), 120},
		{"io_uring_params.features", unsafe.Offsetof(p.features), 20},
		{"io_uring_params.sq_off", unsafe.Offsetof(p.sqOff), 40},
		{"io_uring_params.cq_off", unsafe.Offsetof(p.cqOff), 80},
		{"io_sqring_offsets.array", unsafe.Offsetof(p.sqOff.array), 24},
		{"io_sqring_offsets.user_addr", unsafe.Offsetof(p.sqOff.userAddr), 32},
		{"io_cqring_offsets.cqes", unsafe.Offsetof(p.cqOff.cqes), 20},
		{"io_cqring_offsets.user_addr", unsafe.Offsetof(p.cqOff.userAddr), 32},
		{"sizeof(io_uring_sqe)", unsafe.Sizeof(sqe), 64},
		{"io_uring_sqe.off", unsafe.Offsetof(sqe.off), 8},
		{"io_uring_sqe.addr", unsafe.Offsetof(sqe.addr), 16},
		{"io_uring_sqe.len", unsafe.Offsetof(sqe.len), 24},
		{"io_uring_sqe.rw_flags", unsafe.Offsetof(sqe.rwFlags), 28},
		{"io_uring_sqe.user_data", unsafe.Offsetof(sqe.userData), 32},
		{"io_uring_sqe.buf_index", unsafe.Offsetof(sqe.bufIndex), 40},
		{"io_uring_sqe.personality", unsafe.Offsetof(sqe.personality), 42},
		{"io_uring_sqe.splice_fd_in", unsafe.Offsetof(sqe.spliceFdIn), 44},
		{"io_uring_sqe.addr3", unsafe.Offsetof(sqe.addr3), 48},
		{"sizeof(io_uring_cqe)", unsafe.Sizeof(ioUringCqe{}), 16},
		{"io_uring_cqe.res", unsafe.Offsetof(ioUringCqe{}.res), 8},
		{"sizeof(uffdio_api)", unsafe.Sizeof(uffdioAPIArg{}), 24},
		{"sizeof(uffdio_register)", unsafe.Sizeof(uffdioRegisterArg{}), 32},
		{"uffdio_register.mode", unsafe.Offsetof(uffdioRegisterArg{}.mode), 16},
		{"sizeof(uffdio_writeprotect)", unsafe.Sizeof(uffdioWriteprotectArg{}), 24},
		{"UFFDIO_API", uffdioAPI, 0xc018aa3f},
		{"UFFDIO_REGISTER", uffdioRegister, 0xc020aa00},
		{"UFFDIO_UNREGISTER", uffdioUnregister, 0x8010aa01},
		{"UFFDIO_WRITEPROTECT", uffdioWriteprotect, 0xc018aa06},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// pinMmap maps n private anonymous pages without transparent huge pages.
func pinMmap(t testing.TB, pages int, prot int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, pages*pinPage, prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	unix.Madvise(b, unix.MADV_NOHUGEPAGE)
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// pinFile creates a file holding data and returns an O_RDWR fd for it.
func pinFile(t testing.TB, name string, data []byte) (path string, fd int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return path, fd
}

// newTestUring sets up a ring, skipping (never passing silently) when the
// kernel does not offer io_uring.
func newTestUring(t testing.TB) *uring {
	t.Helper()
	u := new(uring)
	if e := u.setup(8); e != 0 {
		switch unix.Errno(e) {
		case unix.ENOSYS, unix.EPERM:
			t.Skipf("io_uring unavailable: io_uring_setup: %v (kernel.io_uring_disabled or seccomp)", unix.Errno(e))
		}
		t.Fatalf("io_uring_setup: %v", unix.Errno(e))
	}
	t.Cleanup(u.close)
	t.Logf("io_uring: sq_entries=%d cq_entries=%d features=%#x single_mmap=%v",
		u.params.sqEntries, u.params.cqEntries, u.params.features, u.single)
	return u
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestUringFixedReadWrite(t *testing.T) {
	u := newTestUring(t)
	if !u.ok() {
		t.Fatal("ok() false after setup")
	}
	buf := pinMmap(t, 2, unix.PROT_READ|unix.PROT_WRITE)
	want := pattern(2*pinPage, 3)
	_, rfd := pinFile(t, "in", want)
	if e := u.registerBuffer(addrOf(buf), uintptr(len(buf))); e != 0 {
		t.Fatalf("registerBuffer: %v", unix.Errno(e))
	}

	// Read the whole file into the fixed buffer.
	res, e := u.readFixed(rfd, addrOf(buf), uintptr(len(buf)), 0)
	if e != 0 || res != int32(len(buf)) {
		t.Fatalf("readFixed = %d, %v; want %d", res, unix.Errno(e), len(buf))
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("readFixed: buffer does not hold the file's bytes")
	}
	// A sub-range of the buffer, from a file offset.
	res, e = u.readFixed(rfd, addrOf(buf)+pinPage, 100, 5)
	if e != 0 || res != 100 || !bytes.Equal(buf[pinPage:pinPage+100], want[5:105]) {
		t.Fatalf("readFixed(sub-range) = %d, %v or wrong bytes", res, unix.Errno(e))
	}
	// Short read at end of file.
	res, e = u.readFixed(rfd, addrOf(buf), pinPage, uint64(len(want)-10))
	if e != 0 || res != 10 {
		t.Fatalf("readFixed(at EOF-10) = %d, %v; want 10", res, unix.Errno(e))
	}

	// Memory to file.
	out := pattern(len(buf), 101)
	copy(buf, out)
	path, wfd := pinFile(t, "out", nil)
	res, e = u.writeFixed(wfd, addrOf(buf), uintptr(len(buf)), 0)
	if e != 0 || res != int32(len(buf)) {
		t.Fatalf("writeFixed = %d, %v; want %d", res, unix.Errno(e), len(buf))
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, out) {
		t.Fatalf("writeFixed: file holds %d bytes (err %v), not the buffer", len(got), err)
	}

	// Outside the registered buffer: the request itself fails with EFAULT.
	other := pinMmap(t, 1, unix.PROT_READ|unix.PROT_WRITE)
	res, e = u.readFixed(rfd, addrOf(other), pinPage, 0)
	if e != 0 || res != -int32(unix.EFAULT) {
		t.Fatalf("readFixed outside the buffer = %d, %v; want -EFAULT", res, unix.Errno(e))
	}
	// Bad file descriptor: reported in the CQE, not by io_uring_enter.
	res, e = u.readFixed(-1, addrOf(buf), pinPage, 0)
	if e != 0 || res != -int32(unix.EBADF) {
		t.Fatalf("readFixed(fd -1) = %d, %v; want -EBADF", res, unix.Errno(e))
	}

	// Re-registration replaces the buffer: the old one is now outside.
	if e := u.registerBuffer(addrOf(other), pinPage); e != 0 {
		t.Fatalf("registerBuffer(again): %v", unix.Errno(e))
	}
	if res, _ = u.readFixed(rfd, addrOf(buf), pinPage, 0); res != -int32(unix.EFAULT) {
		t.Fatalf("readFixed into the unregistered old buffer = %d; want -EFAULT", res)
	}
	if res, _ = u.readFixed(rfd, addrOf(other), pinPage, 0); res != pinPage || !bytes.Equal(other, want[:pinPage]) {
		t.Fatalf("readFixed into the new buffer = %d or wrong bytes", res)
	}

	// Allocation-free: the executor's children may call it.
	if n := testing.AllocsPerRun(20, func() { u.readFixed(rfd, addrOf(other), pinPage, 0) }); n != 0 {
		t.Fatalf("readFixed allocates %v times per call", n)
	}

	u.close()
	if u.ok() {
		t.Fatal("ok() true after close")
	}
	u.close() // idempotent
	var zero uring
	zero.close() // safe on a zero uring
	if _, e := zero.readFixed(rfd, addrOf(other), pinPage, 0); e != uintptr(unix.EBADF) {
		t.Fatalf("readFixed on a closed ring: errno %v, want EBADF", unix.Errno(e))
	}
}

// TestUringRegisterReadOnlyFails: registration pins pages for writing
// (FOLL_WRITE|FOLL_LONGTERM), which PROT_READ memory refuses.
func TestUringRegisterReadOnlyFails(t *testing.T) {
	u := newTestUring(t)
	ro := pinMmap(t, 1, unix.PROT_READ)
	e := u.registerBuffer(addrOf(ro), pinPage)
	t.Logf("registerBuffer(PROT_READ) errno = %v", unix.Errno(e))
	if e != uintptr(unix.EFAULT) {
		t.Fatalf("registerBuffer(PROT_READ memory): errno %v, want EFAULT", unix.Errno(e))
	}
	if u.hasBuf {
		t.Fatal("failed registration left hasBuf set")
	}
}

// TestUringPinnedAfterDontneed: MADV_DONTNEED drops the page from the
// mapping but not the ring's pin; readFixed keeps writing into the pinned,
// now unreachable page, while the mapping faults in a fresh zero page.
func TestUringPinnedAfterDontneed(t *testing.T) {
	u := newTestUring(t)
	buf := pinMmap(t, 1, unix.PROT_READ|unix.PROT_WRITE)
	for i := range buf {
		buf[i] = 'A'
	}
	want := bytes.Repeat([]byte{'B'}, pinPage)
	_, fd := pinFile(t, "b", want)
	if e := u.registerBuffer(addrOf(buf), pinPage); e != 0 {
		t.Fatalf("registerBuffer: %v", unix.Errno(e))
	}
	if err := unix.Madvise(buf, unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	res, e := u.readFixed(fd, addrOf(buf), pinPage, 0)
	if e != 0 || res != pinPage {
		t.Fatalf("readFixed after MADV_DONTNEED = %d, %v; want %d (the pin keeps the old page)", res, unix.Errno(e), pinPage)
	}
	if !bytes.Equal(buf, make([]byte, pinPage)) {
		t.Fatalf("after MADV_DONTNEED + readFixed the mapping reads %q..., want zeros: the data went to the pinned old page", buf[:8])
	}
	t.Logf("readFixed after MADV_DONTNEED: res=%d, mapping reads zeros (data landed in the detached pinned page)", res)

	// Re-registering pins the mapping's current page; now reads land.
	if e := u.registerBuffer(addrOf(buf), pinPage); e != 0 {
		t.Fatalf("registerBuffer(again): %v", unix.Errno(e))
	}
	if res, e = u.readFixed(fd, addrOf(buf), pinPage, 0); e != 0 || res != pinPage || !bytes.Equal(buf, want) {
		t.Fatalf("readFixed after re-registration = %d, %v or the mapping does not see the data", res, unix.Errno(e))
	}
}

// TestUringPinnedFork runs TestPinHelperProcess in a child process: it
// forks (raw clone, as the executor does) while a fixed buffer is
// registered, then checks who sees io_uring's writes into the buffer.
func TestUringPinnedFork(t *testing.T) {
	newTestUring(t) // skip early if io_uring is unavailable
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPinHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FORKFUZZ_PIN_HELPER=1")
	out, err := cmd.CombinedOutput()
	t.Logf("helper process output:\n%s", out)
	if err != nil {
		t.Fatalf("helper process: %v", err)
	}
	if !strings.Contains(string(out), "PINFORK ok") {
		t.Fatal("helper process did not report PINFORK ok")
	}
}

// Word patterns of the fork test's page contents.
const (
	pinWordA = 0x4141414141414141 // before fork
	pinWordB = 0x4242424242424242 // parent's readFixed after fork
	pinWordC = 0x4343434343434343 // child's readFixed
)

// Exit codes of pinForkChild.
const (
	pinChildOK          = 0
	pinChildSawB        = 1 // the child's copy changed with the parent's readFixed
	pinChildMixed       = 2 // its page held something else
	pinChildReadFailed  = 3 // the child's own readFixed failed
	pinChildSawC        = 4 // the child's readFixed landed in the child's copy
	pinChildUnreachable = 5
)

// pinClassify returns the word pattern filling the page at addr, or 0.
// Plain loads only: runs in the forked child.
func pinClassify(addr uintptr) uint64 {
	w := load64(addr)
	for i := uintptr(8); i < pinPage; i += 8 {
		if load64(addr+i) != w {
			return 0
		}
	}
	return w
}

// pinForkChild is the body of the forked child: raw system calls, plain
// loads, no allocation, no runtime calls (see doc.go).
func pinForkChild(u *uring, ctl, page uintptr, fdC int) {
	sys2(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL))
	for atomic.LoadUint32(ringU32(ctl)) == 0 {
		rawSyscall6(unix.SYS_FUTEX, ctl, futexWait, 0, 0, 0, 0)
	}
	switch pinClassify(page) {
	case pinWordA:
	case pinWordB:
		sysExit(pinChildSawB)
	default:
		sysExit(pinChildMixed)
	}
	// The ring and its fixed buffer are shared with the parent: this read
	// goes into the page the parent registered (the parent's page), not into
	// the child's copy at the same address.
	res, e := u.readFixed(fdC, page, pinPage, 0)
	if e != 0 || res != pinPage {
		sysExit(pinChildReadFailed)
	}
	if pinClassify(page) != pinWordA {
		sysExit(pinChildSawC)
	}
	sysExit(pinChildOK)
}

// TestPinHelperProcess is the body of TestUringPinnedFork's child process.
func TestPinHelperProcess(t *testing.T) {
	if os.Getenv("FORKFUZZ_PIN_HELPER") != "1" {
		t.Skip("helper process for TestUringPinnedFork")
	}
	runtime.LockOSThread() // the child's PDEATHSIG is tied to this thread; never unlocked
	growStack(256 << 10)

	var u uring
	if e := u.setup(8); e != 0 {
		t.Fatalf("io_uring_setup: %v", unix.Errno(e))
	}
	defer u.close()
	page := pinMmap(t, 1, unix.PROT_READ|unix.PROT_WRITE)
	for i := range page {
		page[i] = 'A'
	}
	_, fdB := pinFile(t, "b", bytes.Repeat([]byte{'B'}, pinPage))
	_, fdC := pinFile(t, "c", bytes.Repeat([]byte{'C'}, pinPage))
	if e := u.registerBuffer(addrOf(page), pinPage); e != 0 {
		t.Fatalf("registerBuffer: %v", unix.Errno(e))
	}
	ctlMem, err := unix.Mmap(-1, 0, pinPage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ctlMem)
	ctl := addrOf(ctlMem)
	pageAddr := addrOf(page)

	var all, old uint64 = ^uint64(0), 0
	sigBlockAll(&all, &old)
	pid, errno := rawFork()
	if errno == 0 && pid == 0 {
		pinForkChild(&u, ctl, pageAddr, fdC)
		sysExit(pinChildUnreachable)
	}
	sigRestore(&old)
	if errno != 0 {
		t.Fatalf("fork: %v", unix.Errno(errno))
	}
	release := func() {
		atomic.StoreUint32(ringU32(ctl), 1)
		unix.Syscall(unix.SYS_FUTEX, ctl, futexWake, 1)
	}

	// Parent: io_uring writes into the pinned page, which fork left with the
	// parent (the child got a copy of it at fork time).
	res, e := u.readFixed(fdB, pageAddr, pinPage, 0)
	if e != 0 || res != pinPage {
		release()
		t.Fatalf("parent readFixed = %d, %v", res, unix.Errno(e))
	}
	if pinClassify(pageAddr) != pinWordB {
		release()
		t.Fatalf("parent does not see its own readFixed: page starts %q", page[:8])
	}
	release()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if !ws.Exited() || ws.ExitStatus() != pinChildOK {
		t.Fatalf("child: wait status %#x (exit code %d; 1 = saw the parent's data, 2 = other, 3 = its readFixed failed, 4 = its readFixed landed in its own copy)",
			uint32(ws), ws.ExitStatus())
	}
	if w := pinClassify(pageAddr); w != pinWordC {
		t.Fatalf("parent page after the child's readFixed holds %#x, want the child's data %#x", w, uint64(pinWordC))
	}
	t.Log("PINFORK ok: parent sees its readFixed; child's copy kept the pre-fork data; the child's readFixed through the shared ring landed in the parent's page")
}

// pagemapEntry reads the /proc/self/pagemap entry of the page at addr.
func pagemapEntry(t testing.TB, addr uintptr) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], int64(addr/pinPage*8)); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// withTimeout runs f on another goroutine and fails if it does not return
// within 5 s (a write stuck in a synchronous userfault would hang).
func withTimeout(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5 s: the write fault was not resolved asynchronously", what)
	}
}

func openTestUffd(t *testing.T) int {
	t.Helper()
	fd, e, reason := uffdOpen()
	if e != 0 {
		t.Skipf("%s (errno %v)", reason, unix.Errno(e))
	}
	t.Cleanup(func() { unix.Close(fd) })
	// fdinfo shows "API: aa:<enabled features>:<ioctls>".
	if info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd)); err == nil {
		for _, l := range strings.Split(string(info), "\n") {
			if strings.HasPrefix(l, "API:") {
				t.Logf("userfaultfd %s (WP_ASYNC=%#x WP_UNPOPULATED=%#x)", l, uffdFeatureWPAsync, uffdFeatureWPUnpopulated)
			}
		}
	}
	return fd
}

// TestUffdFeatures logs what the kernel offers (UFFDIO_API with no
// features on a fresh userfaultfd) and checks uffdOpen's choice against it.
func TestUffdFeatures(t *testing.T) {
	r, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly, 0, 0)
	if e != 0 {
		t.Skipf("userfaultfd(UFFD_USER_MODE_ONLY): %v", e)
	}
	offered, errno := uffdAPICall(int(r), 0)
	unix.Close(int(r))
	if errno != 0 {
		t.Fatalf("UFFDIO_API(0): %v", unix.Errno(errno))
	}
	t.Logf("kernel offers uffd features %#x: PAGEFAULT_FLAG_WP=%v WP_UNPOPULATED=%v WP_ASYNC=%v",
		offered, offered&uffdFeaturePagefaultFlagWP != 0, offered&uffdFeatureWPUnpopulated != 0, offered&uffdFeatureWPAsync != 0)
	fd, e2, reason := uffdOpen()
	if offered&uffdFeatureWPAsync == 0 {
		if e2 == 0 || !strings.Contains(reason, "WP_ASYNC") {
			t.Fatalf("kernel lacks WP_ASYNC but uffdOpen = %d, %v, %q", fd, unix.Errno(e2), reason)
		}
		t.Skip(reason)
	}
	if e2 != 0 {
		t.Fatalf("kernel offers WP_ASYNC but uffdOpen failed: %s (%v)", reason, unix.Errno(e2))
	}
	unix.Close(fd)
}

func TestUffdWriteProtectAsync(t *testing.T) {
	fd := openTestUffd(t)
	const pages = 4
	mem := pinMmap(t, pages, unix.PROT_READ|unix.PROT_WRITE)
	for i := 0; i < pages; i++ {
		mem[i*pinPage] = byte(i + 1) // populate
	}
	base := addrOf(mem)
	for i := 0; i < pages; i++ {
		if pm := pagemapEntry(t, base+uintptr(i)*pinPage); pm&pmUffdWP != 0 || pm&pmPresent == 0 {
			t.Fatalf("page %d before write-protect: pagemap %#x, want present without uffd-wp", i, pm)
		}
	}
	if e := uffdWriteProtect(fd, base, pages*pinPage); e != 0 {
		t.Fatalf("uffdWriteProtect: %v", unix.Errno(e))
	}
	for i := 0; i < pages; i++ {
		if pm := pagemapEntry(t, base+uintptr(i)*pinPage); pm&pmUffdWP == 0 {
			t.Fatalf("page %d after write-protect: pagemap %#x, uffd-wp bit 57 not set", i, pm)
		}
	}

	// A user-space store: the kernel clears uffd-wp and lets it through.
	withTimeout(t, "store to a write-protected page", func() {
		mem[1*pinPage+8] = 0x5a
	})
	// A kernel-mode store (copy_to_user from pread) into another page.
	_, ffd := pinFile(t, "k", bytes.Repeat([]byte{0x77}, 16))
	withTimeout(t, "pread into a write-protected page", func() {
		if n, err := unix.Pread(ffd, mem[3*pinPage+16:3*pinPage+32], 0); n != 16 || err != nil {
			t.Errorf("pread into the write-protected page = %d, %v", n, err)
		}
	})
	if mem[1*pinPage+8] != 0x5a || mem[1*pinPage] != 2 || mem[3*pinPage+16] != 0x77 || mem[3*pinPage] != 4 {
		t.Fatal("values after the writes are wrong")
	}
	for i, wantWP := range []bool{true, false, true, false} {
		pm := pagemapEntry(t, base+uintptr(i)*pinPage)
		if got := pm&pmUffdWP != 0; got != wantWP {
			t.Errorf("page %d after writes: pagemap %#x, uffd-wp %v, want %v", i, pm, got, wantWP)
		}
	}
	// Reads do not clear it.
	_ = mem[0] + mem[2*pinPage]
	if pm := pagemapEntry(t, base); pm&pmUffdWP == 0 {
		t.Errorf("a read cleared uffd-wp: pagemap %#x", pm)
	}
}

// TestUffdWriteProtectUnpopulated: with WP_UNPOPULATED (implied by WP_ASYNC)
// never-touched pages are write-protected too, through a pte marker.
func TestUffdWriteProtectUnpopulated(t *testing.T) {
	fd := openTestUffd(t)
	mem := pinMmap(t, 2, unix.PROT_READ|unix.PROT_WRITE)
	base := addrOf(mem)
	if e := uffdWriteProtect(fd, base, 2*pinPage); e != 0 {
		t.Fatalf("uffdWriteProtect: %v", unix.Errno(e))
	}
	for i := 0; i < 2; i++ {
		pm := pagemapEntry(t, base+uintptr(i)*pinPage)
		t.Logf("unpopulated page %d after write-protect: pagemap %#x", i, pm)
		if pm&pmUffdWP == 0 || pm&pmPresent != 0 {
			t.Fatalf("unpopulated page %d: pagemap %#x, want not present with uffd-wp (pte marker)", i, pm)
		}
	}
	withTimeout(t, "store to an unpopulated write-protected page", func() { mem[pinPage] = 9 })
	if pm := pagemapEntry(t, base+pinPage); pm&pmUffdWP != 0 || pm&pmPresent == 0 || mem[pinPage] != 9 {
		t.Fatalf("written page: pagemap %#x value %d, want present, uffd-wp clear, 9", pm, mem[pinPage])
	}
	if pm := pagemapEntry(t, base); pm&pmUffdWP == 0 {
		t.Fatalf("untouched page lost uffd-wp: pagemap %#x", pm)
	}
}

// TestPinUffdInteraction shows what uffd-wp dirty tracking sees of writes
// made through an io_uring fixed buffer: registration pins the pages for
// writing, which counts as a write (uffd-wp cleared); writes through an
// existing pin bypass the page tables and leave uffd-wp set.
func TestPinUffdInteraction(t *testing.T) {
	fd := openTestUffd(t)
	u := newTestUring(t)
	mem := pinMmap(t, 1, unix.PROT_READ|unix.PROT_WRITE)
	mem[0] = 1
	base := addrOf(mem)
	if e := uffdWriteProtect(fd, base, pinPage); e != 0 {
		t.Fatalf("uffdWriteProtect: %v", unix.Errno(e))
	}
	withTimeout(t, "registerBuffer on a write-protected page", func() {
		if e := u.registerBuffer(base, pinPage); e != 0 {
			t.Errorf("registerBuffer: %v", unix.Errno(e))
		}
	})
	pmAfterPin := pagemapEntry(t, base)
	t.Logf("after registerBuffer (FOLL_WRITE pin): pagemap %#x", pmAfterPin)
	if pmAfterPin&pmUffdWP != 0 {
		t.Errorf("pinning for write kept uffd-wp set (pagemap %#x); expected the pin's write fault to clear it", pmAfterPin)
	}
	// Protect again while pinned, then write through the pin.
	if e := uffdWriteProtect(fd, base, pinPage); e != 0 {
		t.Fatalf("uffdWriteProtect(pinned page): %v", unix.Errno(e))
	}
	if pm := pagemapEntry(t, base); pm&pmUffdWP == 0 {
		t.Fatalf("write-protecting the pinned page did not set uffd-wp: pagemap %#x", pm)
	}
	_, ffd := pinFile(t, "d", bytes.Repeat([]byte{'D'}, pinPage))
	var res int32
	withTimeout(t, "readFixed into a write-protected pinned page", func() { res, _ = u.readFixed(ffd, base, pinPage, 0) })
	pm := pagemapEntry(t, base)
	t.Logf("after readFixed through the pin: res=%d mem[0]=%q pagemap %#x", res, mem[0], pm)
	if res != pinPage || mem[0] != 'D' {
		t.Fatalf("readFixed = %d, mem[0] = %q; want %d, 'D'", res, mem[0], pinPage)
	}
	if pm&pmUffdWP == 0 {
		t.Fatalf("uffd-wp cleared by a write through the pin (pagemap %#x); expected it to stay set", pm)
	}
}
