package executor

// Replayable fail_nth: the kernel's cache of thread stacks.
//
// fork's failure points start with dup_task_struct's thread stack. With
// CONFIG_VMAP_STACK (x86_64 defconfig) the kernel keeps up to two freed
// stacks per CPU (kernel/fork.c: cached_stacks, NR_CACHED_STACKS) and takes
// one before it vmallocs a new stack; a vmalloc makes several allocations
// (vmap area, stack pages, page array), each a failure point. Whether the
// forking CPU's cache held a stack depends on which tasks ran and exited on
// it before, so the K-th failure point of the same fork moved from run to
// run, and a `fork fN fail_nth=K` did not hit the same site twice
// (TestQEMUFailNthPoints saw one fork's count of failure points vary with
// the executor's VMAs and page tables unchanged).
//
// primeStackCache makes the cache full before a fork with fail_nth: it pins
// the forking thread to CPU 0, forks two children that stay alive until
// both exist (so neither reuses the other's stack), then kills and reaps
// them; each exit puts its stack back into CPU 0's cache at the dead
// task's last context switch (free_thread_stack ->
// try_release_thread_stack_to_cache), before the parent runs again on that
// CPU. The injected fork then takes a cached stack and makes no vmalloc.
// It also fixes the PIDs (ns_last_pid) and reserveHeapTables fixes the Go
// heap's page tables: together they make the count all but constant
// (docs/rollback.md, docs/executor.md).

import (
	"os"
	"runtime"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// primeStackCache fills CPU 0's stack cache and leaves the calling thread
// pinned to CPU 0; the returned function restores its affinity. Main
// process, executor thread only. Failures are ignored: the fork then runs
// as before, just less replayable.
func (m *machine) primeStackCache() func() {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return func() {}
	}
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		return func() {}
	}
	// The PID allocator's radix tree allocates a node when a PID lands in
	// an empty 64-PID range: fixed PIDs make that the same every run.
	os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(fixedLastPID), 0)
	var pids [2]uintptr
	sigBlockAll(&m.sigAll, &m.sigOld)
	for i := range pids {
		pid, errno := rawFork()
		if errno != 0 {
			break
		}
		if pid == 0 {
			pauseForever()
		}
		pids[i] = pid
	}
	sigRestore(&m.sigOld)
	for _, pid := range pids {
		if pid > 0 {
			sys2(unix.SYS_KILL, pid, uintptr(unix.SIGKILL))
		}
	}
	for _, pid := range pids {
		if pid > 0 {
			var st int32
			for blockingWait4(int(pid), &st) == uintptr(unix.EINTR) {
			}
		}
	}
	return func() { unix.SchedSetaffinity(0, &old) }
}

// fixedLastPID is where PIDs continue before an injected fork: the
// sponges get 30001 and 30002, the forked child 30003.
const fixedLastPID = "30000"

// heapReserve is how much Go heap the executor touches once when it
// starts, then gives back (debug.FreeOSMemory): the page tables that map
// it stay, so the heap's later growth (below the arena in address order,
// hence before the program's regions among fork's failure points) adds no
// page tables, whose allocations would move the program's failure points.
const heapReserve = 64 << 20

var heapSink []byte

// reserveHeapTables touches heapReserve bytes of Go heap and frees them.
func reserveHeapTables() {
	heapSink = make([]byte, heapReserve)
	for i := 0; i < len(heapSink); i += 4096 {
		heapSink[i] = 1
	}
	heapSink = nil
	runtime.GC()
	debug.FreeOSMemory()
}
