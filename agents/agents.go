// Package agents is the floor of targets: the places programs run. This
// file's package holds the Target contract (target.go) that every target
// implements, and the native target (the host kernel through an executor
// process). The targets themselves are its subpackages:
//
//	agents/executor  the only code that forks and touches raw memory (native, and inside VMs)
//	agents/vm        QEMU VMs booted with the kernel under test (guest init, console, instances)
//	agents/sim       the simulated kernel (eager, On-demand-fork and Async-fork models, mutants)
//
// Targets import the vocabulary below them (fuzz/prog, fuzz/obs, kernel,
// kernel/report) and nothing above: judging (checker, checker/judge) and
// orchestration (campaign/...) import targets, never the other way round.
package agents

import (
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Native runs programs on the host kernel in a separate executor process.
type Native struct {
	remote *executor.Remote
}

// NewNative returns a target that starts executors with command (nil: this
// binary with the "executor" subcommand, which must call executor.Serve).
func NewNative(command func() *exec.Cmd) *Native {
	if command == nil {
		command = SelfExecutor
	}
	return &Native{remote: &executor.Remote{Command: command, Stderr: os.Stderr}}
}

// SelfExecutor runs this binary as "forkfuzz executor".
func SelfExecutor() *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, "executor")
}

func (n *Native) Name() string { return "native" }

func (n *Native) Run(p *prog.Program, opt Options) (*obs.Observation, error) {
	return n.remote.Run(p, opt.Executor())
}

// HugetlbPages is the host's free 2 MiB hugetlb pages (agents.HugetlbHost;
// 0 where none are reserved, as on most hosts).
func (n *Native) HugetlbPages() int {
	b, err := os.ReadFile("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
	if err != nil {
		return 0
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return v
}

// FileSystems are the file systems of the file region kinds the host has
// a writable directory on (agents.FileSystemHost; executor.FileDir).
func (n *Native) FileSystems() []prog.FS {
	var fs []prog.FS
	for _, f := range prog.FileSystems() {
		if _, err := executor.FileDir(f); err == nil {
			fs = append(fs, f)
		}
	}
	return fs
}

// Restarts is how many times the executor process was restarted.
func (n *Native) Restarts() int { return n.remote.Restarts }

func (n *Native) Close() error {
	n.remote.Close()
	return nil
}
