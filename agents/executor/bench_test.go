package executor

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The executor's cost per fork is compared with a plain fork+wait loop over
// the same amount of touched memory, in the same run:
//
//	go test -run '^$' -bench 'Fork' ./agents/executor/
//
// BenchmarkExecutorFork runs a program that touches every page of one region,
// forks, and has the child dump its view (read every page, digest it);
// BenchmarkPlainForkWait touches the same memory once, then only forks a
// child that exits at once and waits for it.
var benchSizes = []int{1, 256, 4096} // pages

func BenchmarkExecutorFork(b *testing.B) {
	for _, pages := range benchSizes {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			p, err := prog.Parse([]byte(fmt.Sprintf(`forkfuzz v1
region r0 anon-private pages=%d thp=off
store r0 off=0x0 count=%d stride=0x1000
fork f0
wait f0
`, pages, pages)))
			if err != nil {
				b.Fatal(err)
			}
			x := executor(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o, err := x.Run(p, Options{})
				if err != nil || o.Ops[2].Ret != 0 {
					b.Fatalf("run: %v", err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "forks/s")
		})
	}
}

func BenchmarkPlainForkWait(b *testing.B) {
	for _, pages := range benchSizes {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			mem, err := unix.Mmap(-1, 0, pages*prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Munmap(mem)
			unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
			for i := 0; i < len(mem); i += prog.PageSize {
				mem[i] = 1
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := plainForkWait(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "forks/s")
		})
	}
}

// BenchmarkPlainFreshForkWait does per iteration what the executor's program
// does, without the harness and the views: map fresh memory, touch every
// page, fork a child that exits at once, wait, unmap.
func BenchmarkPlainFreshForkWait(b *testing.B) {
	for _, pages := range benchSizes {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				mem, err := unix.Mmap(-1, 0, pages*prog.PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
				if err != nil {
					b.Fatal(err)
				}
				unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
				for i := 0; i < len(mem); i += prog.PageSize {
					mem[i] = 1
				}
				if err := plainForkWait(); err != nil {
					b.Fatal(err)
				}
				unix.Munmap(mem)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "forks/s")
		})
	}
}

// plainForkWait forks a child that exits at once, and reaps it.
func plainForkWait() error {
	var all, old uint64 = ^uint64(0), 0
	sigBlockAll(&all, &old)
	pid, errno := rawFork()
	if errno == 0 && pid == 0 {
		sysExit(0)
	}
	sigRestore(&old)
	if errno != 0 {
		return unix.Errno(errno)
	}
	var ws unix.WaitStatus
	_, err := unix.Wait4(int(pid), &ws, 0, nil)
	return err
}
