package executor

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

// executorMem reads the executor's own memory (obs.ExecutorMem): what the
// main process's forks copy besides the program's regions. nil when
// /proc/self/status cannot be read.
func executorMem() *obs.ExecutorMem {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := &obs.ExecutorMem{
		RssAnonKB: statusKB(b, "RssAnon:"),
		PTEKB:     statusKB(b, "VmPTE:"),
		HeapKB:    int64(ms.HeapSys-ms.HeapReleased) >> 10,
		StackKB:   int64(ms.StackInuse) >> 10,
	}
	return m
}

// statusKB is the value of a "Key:   N kB" line of /proc/PID/status (-1:
// absent).
func statusKB(status []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(key))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return -1
}
