package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker/cut"
)

// Porcupine runs in a memory-capped worker process (cut.Isolated): its
// search can blow up on histories with many overlapping writers.

func init() {
	commands = append(commands, command{name: "porcupine-worker", help: "decide one history with porcupine (started by forkfuzz itself)", run: cmdPorcupineWorker, hidden: true})
	cut.UseIsolated(&cut.Isolated{Command: selfCommand("porcupine-worker"), MemLimit: porcupineMemLimit()})
}

// defaultPorcupineMem is the worker's cap unless FORKFUZZ_PORCUPINE_MEM
// (bytes) says otherwise.
const defaultPorcupineMem = 2 << 30

func porcupineMemLimit() uint64 {
	if s := os.Getenv("FORKFUZZ_PORCUPINE_MEM"); s != "" {
		if v, err := strconv.ParseUint(s, 0, 64); err == nil && v > 0 {
			return v
		}
		fmt.Fprintf(os.Stderr, "forkfuzz: ignoring FORKFUZZ_PORCUPINE_MEM=%q: want a byte count\n", s)
	}
	return defaultPorcupineMem
}

// selfCommand returns a command that runs this binary with args.
func selfCommand(args ...string) func() *exec.Cmd {
	return func() *exec.Cmd {
		cmd := agents.SelfExecutor()
		cmd.Args = append(cmd.Args[:1], args...)
		return cmd
	}
}

func cmdPorcupineWorker(args []string, stdout, stderr io.Writer) int {
	if err := cut.ServeWorker(os.Stdin, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitClean
}
