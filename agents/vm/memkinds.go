package vm

// Guest set-up for the page kinds the kernel treats specially at fork that
// need a system-wide switch: swap (so MADV_PAGEOUT really swaps anonymous
// pages out), KSM (so ksmd merges identical pages of MADV_MERGEABLE
// mappings, scanning fast enough for programs that last milliseconds) and
// hugetlb pages (reserved at boot by hugepages=N on the kernel command
// line, guestHugePages).
// Whether pages really were swapped out or merged at a fork is measured
// per fork by the executor (obs.ForkPages), not assumed from this.

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Swap in the guest: a swap area on a loop device over a file in /tmp
// (tmpfs cannot hold a swap file itself; the loop device makes it a block
// device). The pages still end up in guest RAM, but the kernel's view is
// real swap: swap entries in the page tables, swap cache, swap-in faults.
const (
	guestSwapMiB      = 128 // with forkfuzz.swap=1
	guestSwapMiBSmall = 16  // by default
	guestSwapFile     = "/tmp/forkfuzz.swap"
	loopCtlGetFree    = 0x4C82
	loopSetFD         = 0x4C00
)

// KSM tuning: ksmd wakes every 10 ms and scans up to 4096 pages per wake.
var guestKSM = [][2]string{
	{"/sys/kernel/mm/ksm/pages_to_scan", "4096"},
	{"/sys/kernel/mm/ksm/sleep_millisecs", "10"},
	{"/sys/kernel/mm/ksm/run", "1"},
}

// guestHugePages is how many 2 MiB hugetlb pages a guest of mem MiB
// reserves at boot: 1/32 of its memory (16 pages, 32 MiB, in a 1 GiB
// guest), at least 2 so a private mapping can be copied at fork. Reserved
// pages are not available to anything else, so the share stays small.
func guestHugePages(mem int) int { return max(2, mem/64) }

// setupMemKinds turns swap and KSM on in the guest and says on the
// console what took effect.
//
// Swap is on by default with a small area (guestSwapMiBSmall): enough for
// the pages a program's MADV_PAGEOUT pushes out, too little for memory
// pressure to swap the guest into a stall. With 128 MiB by default, a
// program that dirtied a few hundred MiB (the sweep test's 192 MiB parent,
// then its copy-on-write pass) pushed the 1 GiB guest into swapping onto a
// device whose pages are in the same RAM, and the executor stopped
// answering for over a minute. forkfuzz.swap=1 on the kernel command line
// (--kernel-cmdline, or a target file's cmdline) asks for 128 MiB,
// forkfuzz.swap=0 for none.
func setupMemKinds() {
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if mib := swapMiB(string(cmdline)); mib == 0 {
		consolef("init: no swap (forkfuzz.swap=0: MADV_PAGEOUT will not swap out)")
	} else if dev, err := setupSwap(mib); err != nil {
		consolef("init: no swap (MADV_PAGEOUT will not swap out): %v", err)
	} else {
		consolef("init: swap on %s (%d MiB over %s)", dev, mib, guestSwapFile)
	}
	if b, err := os.ReadFile("/proc/sys/vm/nr_hugepages"); err != nil || strings.TrimSpace(string(b)) == "0" {
		consolef("init: no hugetlb pages (hugetlb regions will be skipped): nr_hugepages %q, %v", strings.TrimSpace(string(b)), err)
	} else {
		consolef("init: %s hugetlb pages of 2 MiB reserved", strings.TrimSpace(string(b)))
	}
	for _, kv := range guestKSM {
		if err := os.WriteFile(kv[0], []byte(kv[1]), 0o644); err != nil {
			consolef("init: KSM not set up (MADV_MERGEABLE pages will not be merged): %v", err)
			return
		}
	}
	consolef("init: KSM running (pages_to_scan 4096, sleep 10 ms)")
}

// setupFileSystems mounts the guest's ext4 (ext4img.go); /tmp is the
// tmpfs of the tmpfs-* regions.
func setupFileSystems() { consolef("%s", setupExt4()) }

func setupSwap(mib int) (string, error) {
	f, err := os.OpenFile(guestSwapFile, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	const page = 4096
	pages := mib << 20 / page
	if err := f.Truncate(int64(pages) * page); err != nil {
		return "", err
	}
	// The swap header (include/linux/swap.h, union swap_header): version
	// 1, last_page, no bad pages, "SWAPSPACE2" at the end of page 0.
	hdr := make([]byte, page)
	binary.LittleEndian.PutUint32(hdr[1024:], 1)
	binary.LittleEndian.PutUint32(hdr[1028:], uint32(pages-1))
	copy(hdr[page-10:], "SWAPSPACE2")
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return "", err
	}
	dev, err := attachLoop(f)
	if err != nil {
		return "", err
	}
	p, err := unix.BytePtrFromString(dev)
	if err != nil {
		return "", err
	}
	if _, _, e := unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(p)), 0, 0); e != 0 {
		return "", fmt.Errorf("swapon %s: %w", dev, e)
	}
	return dev, nil
}

// attachLoop attaches a free loop device to f and returns its path.
func attachLoop(f *os.File) (string, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("loop device: %w", err)
	}
	n, err := unix.IoctlRetInt(ctl, loopCtlGetFree)
	unix.Close(ctl)
	if err != nil {
		return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
	}
	dev := fmt.Sprintf("/dev/loop%d", n)
	lfd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(lfd)
	if err := unix.IoctlSetInt(lfd, loopSetFD, int(f.Fd())); err != nil {
		return "", fmt.Errorf("LOOP_SET_FD %s: %w", dev, err)
	}
	return dev, nil
}

// swapMiB is the guest swap area the kernel command line asks for:
// forkfuzz.swap=0 none, forkfuzz.swap=1 guestSwapMiB, otherwise (the
// default) guestSwapMiBSmall.
func swapMiB(cmdline string) int {
	mib := guestSwapMiBSmall
	for _, f := range strings.Fields(cmdline) {
		switch f {
		case "forkfuzz.swap=0":
			mib = 0
		case "forkfuzz.swap=1":
			mib = guestSwapMiB
		}
	}
	return mib
}
