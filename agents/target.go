// Package agents holds what runs programs: the Target contract that every
// place programs run on implements (the host kernel today; QEMU VMs and the
// simulated kernel plug in the same way), and the executor (agents/executor)
// that does the real system calls.
package agents

import (
	"os"
	"os/exec"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Target runs programs somewhere and reports what happened.
//
// Run returns an observation, or an error. An *executor.CrashError is an
// event caused by the program (the executor died or hung running it) and is
// judged as a finding; any other error is a harness failure (the target
// could not run the program at all) and is never reported as a finding.
type Target interface {
	Name() string
	Run(p *prog.Program, opt executor.Options) (*obs.Observation, error)
	Close() error
}

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

func (n *Native) Run(p *prog.Program, opt executor.Options) (*obs.Observation, error) {
	return n.remote.Run(p, opt)
}

// Restarts is how many times the executor process was restarted.
func (n *Native) Restarts() int { return n.remote.Restarts }

func (n *Native) Close() error {
	n.remote.Close()
	return nil
}
