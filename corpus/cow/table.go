package cow

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// hugetlbSize is one 2 MiB hugetlb page in bytes.
const hugetlbSize = uint64(prog.HugetlbPages) * prog.PageSize

// Why forkfuzz cannot express a case yet.
const (
	missingROPin = "needs a read-only long-term pin (cow.c takes it with gup_test's PIN_LONGTERM_TEST_START, " +
		"FOLL_PIN|FOLL_LONGTERM without FOLL_WRITE, through GUP or GUP-fast, and reads it back with " +
		"PIN_LONGTERM_TEST_READ): forkfuzz has no such operation (its pins, uringreg and odirect, are R/W; " +
		"vmsplice takes plain references); the reference kernel has no CONFIG_GUP_TEST either"
	missingHugetlb1G       = "needs 1 GiB hugetlb pages: the guest reserves only 2 MiB ones"
	missingHugetlbVmsplice = "Linux leaks the other side's write through a vmsplice() of hugetlb pages, and cow.c " +
		"expects it (XFAIL: \"harder to fix and nobody really cares\"); forkfuzz's program fails the same way " +
		"(pipe:vmsplice-foreign-write:hugetlb-private on 6.1.192), so it stays out of the corpus every gate replays"
)

// privateFile sets up cow.c's non-anonymous file cases on a region of
// kind: a private mapping of a file page written with pwrite and faulted
// in by a read (the view). cow.c's second, shared mapping of the file is
// the file itself here: a pwrite after the private write must not show
// through the (now private) page.
func privateFile(b *builder, kind string) rng {
	b.op("region r0 %s pages=1", kind)
	m := rng{r: 0, size: 0x1000}
	b.op("pwrite r0 off=0x0 count=8 stride=0x200")
	b.op("check")
	m.after = func(b *builder) { b.op("pwrite r0 off=0x0 count=8 stride=0x200") }
	return m
}

// Bodies are cow.c's test functions, in its order.
var Bodies = []Body{
	{Name: "cow", Desc: "Basic COW after fork()", Group: Anon, emit: func(b *builder, m rng) {
		f := b.fork()
		b.op("fork %s", f)
		b.write("", m)
		b.op("wait %s", f)
	}},
	{Name: "cow-mprotect", Desc: "Basic COW after fork() with mprotect() optimization", Group: Anon, emit: func(b *builder, m rng) {
		f := b.fork()
		b.op("fork %s", f)
		b.protectRW(m)
		b.write("", m)
		b.op("wait %s", f)
	}},
	{Name: "vmsplice-child", Desc: "vmsplice() + unmap in child", Group: Anon, Vmsplice: true, emit: func(b *builder, m rng) {
		vmspliceInChild(b, m, false)
	}},
	{Name: "vmsplice-child-mprotect", Desc: "vmsplice() + unmap in child with mprotect() optimization", Group: Anon, Vmsplice: true, emit: func(b *builder, m rng) {
		vmspliceInChild(b, m, true)
	}},
	{Name: "vmsplice-before-fork", Desc: "vmsplice() before fork(), unmap in parent after fork()", Group: Anon, Vmsplice: true, emit: func(b *builder, m rng) {
		vmspliceInParent(b, m, true)
	}},
	{Name: "vmsplice-after-fork", Desc: "vmsplice() + unmap in parent after fork()", Group: Anon, Vmsplice: true, emit: func(b *builder, m rng) {
		vmspliceInParent(b, m, false)
	}},
	{Name: "iouring-ro", Desc: "R/O-mapping a page registered as iouring fixed buffer", Group: Anon, emit: func(b *builder, m rng) {
		reg := uringReg(b, m)
		b.protectRW(m)
		b.write("", m)
		uringReads(b, m, reg)
		b.op("check")
	}},
	{Name: "iouring-fork", Desc: "fork() with an iouring fixed buffer", Group: Anon, emit: func(b *builder, m rng) {
		reg := uringReg(b, m)
		f := b.fork()
		b.op("fork %s", f)
		b.write("", m)
		uringReads(b, m, reg)
		b.op("wait %s", f)
	}},
	{Name: "ro-pin-shared", Desc: "R/O GUP pin on R/O-mapped shared page", Group: Anon, Missing: missingROPin},
	{Name: "ro-fast-pin-shared", Desc: "R/O GUP-fast pin on R/O-mapped shared page", Group: Anon, Missing: missingROPin},
	{Name: "ro-pin-prev-shared", Desc: "R/O GUP pin on R/O-mapped previously-shared page", Group: Anon, Missing: missingROPin},
	{Name: "ro-fast-pin-prev-shared", Desc: "R/O GUP-fast pin on R/O-mapped previously-shared page", Group: Anon, Missing: missingROPin},
	{Name: "ro-pin-exclusive", Desc: "R/O GUP pin on R/O-mapped exclusive page", Group: Anon, Missing: missingROPin},
	{Name: "ro-fast-pin-exclusive", Desc: "R/O GUP-fast pin on R/O-mapped exclusive page", Group: Anon, Missing: missingROPin},

	{Name: "collapse-unshared", Desc: "Basic COW after fork() when collapsing before fork()", Group: AnonTHP, emit: func(b *builder, m rng) {
		collapse(b, m, "before")
	}},
	{Name: "collapse-fully-shared", Desc: "Basic COW after fork() when collapsing after fork() (fully shared)", Group: AnonTHP, emit: func(b *builder, m rng) {
		collapse(b, m, "full")
	}},
	{Name: "collapse-lower-shared", Desc: "Basic COW after fork() when collapsing after fork() (lower shared)", Group: AnonTHP, emit: func(b *builder, m rng) {
		collapse(b, m, "lower")
	}},
	{Name: "collapse-upper-shared", Desc: "Basic COW after fork() when collapsing after fork() (upper shared)", Group: AnonTHP, emit: func(b *builder, m rng) {
		collapse(b, m, "upper")
	}},

	{Name: "basic", Desc: "Basic COW", Group: NonAnon, emit: func(b *builder, m rng) {
		b.write("", m)
		if m.after != nil {
			m.after(b)
		}
		b.op("check")
	}},
	{Name: "ro-pin", Desc: "R/O longterm GUP pin", Group: NonAnon, Missing: missingROPin},
	{Name: "ro-fast-pin", Desc: "R/O longterm GUP-fast pin", Group: NonAnon, Missing: missingROPin},
}

// vmspliceInChild: the child splices the range into p0 and unmaps it,
// then (the child has run) the parent writes and reads the pipe back. In
// cow.c the child waits, alive, until the parent wrote; here it has
// exited, which leaves the pages' mappings as they are in cow.c (the
// child unmapped them) and only the pipe referencing them.
func vmspliceInChild(b *builder, m rng, mprotect bool) {
	f := b.fork()
	b.op("fork %s", f)
	b.op("%s: vmsplice r%d off=%#x len=%#x pipe=p0", f, m.r, m.off, spliceLen(m))
	b.op("%s: munmap r%d off=%#x len=%#x", f, m.r, m.off, m.size)
	b.op("wait %s", f)
	if mprotect {
		b.protectRW(m)
	}
	b.write("", m)
	b.op("readpipe p0")
}

// vmspliceInParent: the parent splices (before or after fork), unmaps
// after fork, the child writes, the parent reads the pipe back.
func vmspliceInParent(b *builder, m rng, before bool) {
	splice := fmt.Sprintf("vmsplice r%d off=%#x len=%#x pipe=p0", m.r, m.off, spliceLen(m))
	if before {
		b.op("%s", splice)
	}
	f := b.fork()
	b.op("fork %s", f)
	if !before {
		b.op("%s", splice)
	}
	b.op("munmap r%d off=%#x len=%#x", m.r, m.off, m.size)
	b.write(f+": ", m)
	b.op("wait %s", f)
	b.op("readpipe p0")
}

// uringReg registers (the start of) the range as the fixed buffer and
// returns the registered length.
func uringReg(b *builder, m rng) uint64 {
	reg := min(m.size, maxUring)
	b.op("uringreg r%d off=%#x len=%#x", m.r, m.off, reg)
	return reg
}

// uringReads writes through the pin at the start and the end of the
// registered part: the process must see it.
func uringReads(b *builder, m rng, reg uint64) {
	n := min(reg, maxSplice)
	b.op("uringread r%d off=%#x len=%#x", m.r, m.off, n)
	if reg > n {
		b.op("uringread r%d off=%#x len=%#x", m.r, m.off+reg-n, n)
	}
}

// collapse is do_test_anon_thp_collapse: PTE-map the THP, then collapse it
// before fork ("before"), or after fork with all of it ("full"), its lower
// or its upper half COW-shared with the child.
func collapse(b *builder, m rng, mode string) {
	b.op("mprotect r%d off=%#x len=0x1000 prot=r", m.r, m.off+0x1000)
	b.op("mprotect r%d off=%#x len=0x1000 prot=rw", m.r, m.off+0x1000)
	half := m.size / 2
	switch mode {
	case "before":
		b.op("madvise r%d off=%#x len=%#x advice=collapse", m.r, m.off, m.size)
	case "lower":
		b.op("madvise r%d off=%#x len=%#x advice=dontfork", m.r, m.off+half, half)
	case "upper":
		b.op("madvise r%d off=%#x len=%#x advice=dontfork", m.r, m.off, half)
	}
	f := b.fork()
	b.op("fork %s", f)
	if mode == "lower" || mode == "upper" {
		b.op("madvise r%d off=%#x len=%#x advice=dofork", m.r, m.off, m.size)
	}
	if mode != "before" {
		b.op("madvise r%d off=%#x len=%#x advice=collapse", m.r, m.off, m.size)
	}
	b.write("", m)
	b.op("wait %s", f)
}

// thp declares a THP-enabled region of one PMD and populates it
// (cow.c's do_run_with_thp up to its switch).
func thp(b *builder) rng {
	b.op("region r0 anon-private pages=%d thp=on", thpSize/4096)
	m := rng{r: 0, size: thpSize}
	b.write("", m)
	return m
}

func pageout(b *builder, m rng) {
	b.op("madvise r%d off=%#x len=%#x advice=pageout", m.r, m.off, m.size)
}

func ptemap(b *builder, m rng) {
	b.op("mprotect r%d off=%#x len=0x1000 prot=r", m.r, m.off+0x1000)
	b.op("mprotect r%d off=%#x len=0x1000 prot=rw", m.r, m.off+0x1000)
}

func basePage(b *builder) rng {
	b.op("region r0 anon-private pages=1 thp=off")
	m := rng{r: 0, size: 0x1000}
	b.write("", m)
	return m
}

func singlePTE(b *builder) rng {
	m := thp(b)
	b.op("madvise r0 off=0x1000 len=%#x advice=dontneed", thpSize-0x1000)
	m.size = 0x1000
	return m
}

// zeropages declares two private anonymous regions of pages each, the
// second read-only, and reads both (a view), which maps the (huge)
// zeropage into both: cow.c's run_with_(huge_)zeropage.
func zeropages(b *builder, pages int, thp string) rng {
	b.op("region r0 anon-private pages=%d thp=%s", pages, thp)
	b.op("region r1 anon-private pages=%d thp=%s", pages, thp)
	b.op("mprotect r1 off=0x0 len=%#x prot=r", pages*4096)
	b.op("check")
	return rng{r: 0, size: uint64(pages) * 4096}
}

// Kinds are cow.c's page kinds, in its order.
var Kinds = []Kind{
	{Name: "base", Desc: "base page", Group: Anon, setup: basePage},
	{Name: "base-swap", Desc: "swapped out base page", Group: Anon, setup: func(b *builder) rng {
		m := basePage(b)
		pageout(b, m)
		return m
	}},
	{Name: "thp", Desc: "THP (2048 kB)", Group: Anon, setup: thp},
	{Name: "thp-swap", Desc: "swapped-out THP (2048 kB)", Group: Anon, setup: func(b *builder) rng {
		m := thp(b)
		pageout(b, m)
		return m
	}},
	{Name: "thp-pte", Desc: "PTE-mapped THP (2048 kB)", Group: Anon, setup: func(b *builder) rng {
		m := thp(b)
		ptemap(b, m)
		return m
	}},
	{Name: "thp-pte-swap", Desc: "swapped-out, PTE-mapped THP (2048 kB)", Group: Anon, setup: func(b *builder) rng {
		m := thp(b)
		ptemap(b, m)
		pageout(b, m)
		return m
	}},
	{Name: "thp-single-pte", Desc: "single PTE of THP (2048 kB)", Group: Anon, setup: singlePTE},
	{Name: "thp-single-pte-swap", Desc: "single PTE of swapped-out THP (2048 kB)", Group: Anon, setup: func(b *builder) rng {
		m := singlePTE(b)
		pageout(b, m)
		return m
	}},
	{Name: "thp-partial-mremap", Desc: "partially mremap()'ed THP (2048 kB)", Group: Anon, setup: func(b *builder) rng {
		m := thp(b)
		half := m.size / 2
		// The upper half moves to free space in r0's own span.
		b.op("mremap r0 off=%#x len=%#x newlen=%#x flags=maymove|fixed to=r0 tooff=%#x", half, half, half, 2*thpSize)
		m.size = half
		return m
	}},
	{Name: "thp-partial-shared", Desc: "partially shared THP (2048 kB)", Group: Anon, setup: func(b *builder) rng {
		m := thp(b)
		b.op("madvise r0 off=0x1000 len=%#x advice=dontfork", thpSize-0x1000)
		f := b.fork()
		b.op("fork %s", f)
		b.op("wait %s", f)
		b.op("madvise r0 off=0x1000 len=%#x advice=dofork", thpSize-0x1000)
		return m
	}},
	{Name: "hugetlb-2m", Desc: "hugetlb (2048 kB)", Group: Anon, VmspliceMissing: missingHugetlbVmsplice, setup: func(b *builder) rng {
		// cow.c populates the huge page with a memset.
		b.op("region r0 hugetlb-private pages=%d", prog.HugetlbPages)
		m := rng{r: 0, size: hugetlbSize}
		b.write("", m)
		return m
	}},
	{Name: "hugetlb-1g", Desc: "hugetlb (1048576 kB)", Group: Anon, Missing: missingHugetlb1G},

	{Name: "thp", Desc: "", Group: AnonTHP, setup: thp},

	{Name: "zeropage", Desc: "shared zeropage", Group: NonAnon, setup: func(b *builder) rng {
		return zeropages(b, 1, "off")
	}},
	// cow.c's memfd case: the private mapping's page cache page, faulted
	// in by a read (the view).
	{Name: "memfd", Desc: "memfd", Group: NonAnon, setup: func(b *builder) rng { return privateFile(b, "memfd-private") }},
	// cow.c's tmpfile() is a regular file in $TMPDIR (a tmpfs in
	// forkfuzz's VMs, where the memfd case already covers shmem); here
	// the file is on ext4, so its page is page cache with page_mkwrite,
	// as on a disk.
	{Name: "tmpfile", Desc: "tmpfile", Group: NonAnon, setup: func(b *builder) rng { return privateFile(b, "ext4-private") }},
	{Name: "huge-zeropage", Desc: "huge zeropage", Group: NonAnon, setup: func(b *builder) rng {
		return zeropages(b, thpSize/4096, "on")
	}},
	{Name: "memfd-hugetlb-2m", Desc: "memfd hugetlb (2048 kB)", Group: NonAnon, setup: func(b *builder) rng {
		// The private mapping of a hugetlbfs memfd, its page faulted
		// in by a read (the view). cow.c reads the file back through
		// a second, shared mapping; hugetlbfs has no write(), so
		// there is no pwrite after the private write as for memfd.
		b.op("region r0 memfd-hugetlb-private pages=%d", prog.HugetlbPages)
		b.op("check")
		return rng{r: 0, size: hugetlbSize}
	}},
	{Name: "memfd-hugetlb-1g", Desc: "memfd hugetlb (1048576 kB)", Group: NonAnon, Missing: missingHugetlb1G},
}
