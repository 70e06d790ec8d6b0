package executor

// The fork-latency benchmark's measuring core (forkfuzz bench fork): the
// raw fork stays in this package, the only code that forks. The rest of
// the benchmark (series, statistics, plots, the CI ratio gate) lives in
// bench/latency.

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ForkBenchSpec is one measurement: Reps forks of a process holding
// SizeBytes of touched anonymous private memory.
type ForkBenchSpec struct {
	SizeBytes int64 `json:"size_bytes"`
	// THP asks for transparent huge pages (MADV_HUGEPAGE); otherwise the
	// region is MADV_NOHUGEPAGE (4 KiB pages).
	THP  bool `json:"thp"`
	Reps int  `json:"reps"`
	// PinBytes of the region (from its start, at most its size) are
	// registered as an io_uring fixed buffer before the fork: pinned
	// (FOLL_PIN), so fork copies them, and the mm has MMF_HAS_PINNED.
	PinBytes int64 `json:"pin_bytes,omitempty"`
}

// ForkBenchSample is one fork. Times in nanoseconds (CLOCK_MONOTONIC).
type ForkBenchSample struct {
	// Fork is the parent's fork() call: from just before the system call
	// to its return in the parent.
	Fork int64 `json:"fork_ns"`
	// ChildReady is from just before fork() to the child's first
	// user-space instruction. A kernel that copies page tables in the
	// child before it returns to user space (Async-fork) shows its copy
	// here; on stock fork it is mostly scheduling delay.
	ChildReady int64 `json:"child_ready_ns"`
	// StallTotal and StallMax are the parent's first write to each 2 MiB
	// range after fork (one word at the range's start), summed and the
	// largest: where a lazy or asynchronous fork makes the parent pay its
	// deferred copy, on top of the copy-on-write fault every fork costs.
	StallTotal int64 `json:"stall_total_ns"`
	StallMax   int64 `json:"stall_max_ns"`
	// ChildRead is the child reading one word of every 4 KiB page after
	// the parent's writes.
	ChildRead int64 `json:"child_read_ns"`
	// THPBytes is AnonHugePages of the process just before the fork (has
	// THP taken effect?).
	THPBytes int64 `json:"thp_bytes"`
}

const (
	benchRange = 2 << 20
	benchPage  = 4096
)

// ctl words (uint64 each) in the shared control page.
const (
	bcGo = iota // parent -> child: start reading (uint32 futex word)
	bcReadyS
	bcReadyNs
	bcReadS
	bcReadNs
	bcReadEndS
	bcReadEndNs
	bcSum
	bcWords
)

// ForkBench runs spec in this process. The process must run with
// NeedGODEBUG (children run Go code on the inherited stack).
func ForkBench(spec ForkBenchSpec) ([]ForkBenchSample, error) {
	if !HasGODEBUG() {
		return nil, fmt.Errorf("forkbench: the process must run with GODEBUG=%s", NeedGODEBUG)
	}
	if spec.SizeBytes < benchRange || spec.SizeBytes%benchRange != 0 {
		return nil, fmt.Errorf("forkbench: size %d is not a positive multiple of 2 MiB", spec.SizeBytes)
	}
	if spec.Reps <= 0 {
		spec.Reps = 1
	}
	type result struct {
		s   []ForkBenchSample
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		growStack(256 << 10)
		old := debug.SetGCPercent(-1)
		defer debug.SetGCPercent(old)
		var out []ForkBenchSample
		for r := 0; r < spec.Reps; r++ {
			s, err := forkBenchOne(spec)
			if err != nil {
				done <- result{out, err}
				return
			}
			out = append(out, s)
			runtime.GC()
		}
		done <- result{out, nil}
	}()
	res := <-done
	return res.s, res.err
}

func tsNs(w []uint64, i int) int64 { return int64(w[i])*1e9 + int64(w[i+1]) }

func forkBenchOne(spec ForkBenchSpec) (ForkBenchSample, error) {
	var s ForkBenchSample
	size := uintptr(spec.SizeBytes)
	// Over-map by one range and align, so every 2 MiB range can be a THP.
	raw, err := unix.Mmap(-1, 0, int(size)+benchRange, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return s, fmt.Errorf("forkbench: mmap %d bytes: %w", size, err)
	}
	defer unix.Munmap(raw)
	rawBase := uintptr(unsafe.Pointer(&raw[0]))
	off := (benchRange - rawBase%benchRange) % benchRange
	region := raw[off : off+size]
	base := rawBase + off
	adv := unix.MADV_NOHUGEPAGE
	if spec.THP {
		adv = unix.MADV_HUGEPAGE
	}
	if err := unix.Madvise(region, adv); err != nil {
		return s, fmt.Errorf("forkbench: madvise: %w", err)
	}
	for i := uintptr(0); i < size; i += benchPage {
		region[i] = 1
	}
	if spec.PinBytes > 0 {
		var u uring
		if errno := u.setup(4); errno != 0 {
			return s, fmt.Errorf("forkbench: io_uring_setup: %w", unix.Errno(errno))
		}
		defer u.close()
		if errno := u.registerBuffer(base, uintptr(min(spec.PinBytes, spec.SizeBytes))); errno != 0 {
			return s, fmt.Errorf("forkbench: pinning %d bytes (IORING_REGISTER_BUFFERS): %w", spec.PinBytes, unix.Errno(errno))
		}
	}
	ctlB, err := unix.Mmap(-1, 0, benchPage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return s, fmt.Errorf("forkbench: mmap control page: %w", err)
	}
	defer unix.Munmap(ctlB)
	ctl := unsafe.Slice((*uint64)(unsafe.Pointer(&ctlB[0])), bcWords)
	goWord := (*uint32)(unsafe.Pointer(&ctl[bcGo]))
	s.THPBytes = anonHugeBytes()

	var sigAll, sigOld uint64 = ^uint64(0), 0
	var t [4]uint64
	sigBlockAll(&sigAll, &sigOld)
	benchClock(&t[0])
	pid, errno := rawFork()
	if errno == 0 && pid == 0 {
		benchChild(ctl, goWord, base, size)
	}
	benchClock(&t[2])
	sigRestore(&sigOld)
	if errno != 0 {
		return s, fmt.Errorf("forkbench: fork: %w", unix.Errno(errno))
	}
	start := tsNs(t[:], 0)
	s.Fork = tsNs(t[:], 2) - start
	for r := uintptr(0); r < size; r += benchRange {
		benchClock(&t[0])
		store64(base+r, 2)
		benchClock(&t[2])
		d := tsNs(t[:], 2) - tsNs(t[:], 0)
		s.StallTotal += d
		if d > s.StallMax {
			s.StallMax = d
		}
	}
	atomic.StoreUint32(goWord, 1)
	rawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(goWord)), futexWake, 1, 0, 0, 0)
	var status int32
	for {
		e := blockingWait4(int(pid), &status)
		if e == uintptr(unix.EINTR) {
			continue
		}
		if e != 0 {
			return s, fmt.Errorf("forkbench: wait4: %w", unix.Errno(e))
		}
		break
	}
	if ws := unix.WaitStatus(status); !ws.Exited() || ws.ExitStatus() != 0 {
		return s, fmt.Errorf("forkbench: child ended with status %#x", status)
	}
	s.ChildReady = tsNs(ctl, bcReadyS) - start
	s.ChildRead = tsNs(ctl, bcReadEndS) - tsNs(ctl, bcReadS)
	return s, nil
}

// anonHugeBytes is AnonHugePages of this process (0 if unknown).
func anonHugeBytes() int64 {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "AnonHugePages:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
