package vm

// QEMU, the hypervisor forkfuzz boots VMs with (see hypervisor in
// instance.go): the guest agent's channel is a virtio-serial port backed by
// a Unix socket QEMU creates, the console is the first serial port on
// QEMU's stdout.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const portName = "forkfuzz.0"

type qemu struct{}

func (qemu) name() string { return "QEMU" }

func (qemu) args(t *Target, sock string) []string {
	c := t.cfg
	// -cpu max: QEMU's default CPU model lacks instructions Go code uses.
	accel, cpu := "tcg,thread=multi", "max"
	if t.accel == "kvm" {
		accel, cpu = "kvm", "host"
	}
	// no_timer_check: under TCG on a loaded host the IO-APIC timer check
	// can miss its ticks and panic the boot ("IO-APIC + timer doesn't
	// work!", seen with a host load of 30 on 2 cores); the check guards
	// broken hardware, not what forkfuzz tests.
	cmdline := "console=ttyS0 panic=-1 nokaslr no_timer_check printk.time=1 rdinit=" + AgentBinary
	if c.Cmdline != "" {
		cmdline += " " + c.Cmdline
	}
	cmdline += " hugepages=" + strconv.Itoa(guestHugePages(c.Memory))
	if c.NUMANodes > 1 {
		// Pages move between nodes only when a program moves them.
		cmdline += " numa_balancing=disable"
	}
	cmdline += " -- vm-agent"
	args := []string{
		"-accel", accel, "-cpu", cpu,
		"-m", strconv.Itoa(guestMemory(c.Memory, c.NUMANodes)), "-smp", strconv.Itoa(c.CPUs),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "stdio", "-monitor", "none",
		"-kernel", c.Kernel, "-initrd", t.initrd, "-append", cmdline,
		"-chardev", "socket,id=ff0,path=" + sock + ",server=on,wait=off",
		"-device", "virtio-serial-pci", "-device", "virtserialport,chardev=ff0,name=" + portName,
		// QMP, for saving and loading the VM's state (snapshot.go).
		"-qmp", "unix:" + qmpPath(sock) + ",server=on,wait=off",
	}
	return append(args, numaArgs(c.Memory, c.CPUs, c.NUMANodes)...)
}

// maxNUMANodes bounds Config.NUMANodes.
const maxNUMANodes = 8

// numaExtra is the memory (MiB) of each NUMA node after the first.
const numaExtra = 256

// guestMemory is the guest's whole memory (MiB): mem on node 0 and
// numaExtra on each further node (numaArgs).
func guestMemory(mem, nodes int) int {
	return mem + numaExtra*max(0, min(nodes, maxNUMANodes)-1)
}

// numaArgs gives node 0 all mem MiB and the cpus, and each further node
// numaExtra MiB of its own, so a guest with migration targets has as much
// memory where it runs as one without (node 0's memory pressure, and with
// it compaction and reclaim, stay as they were); nil for one node.
func numaArgs(mem, cpus, nodes int) []string {
	nodes = min(nodes, maxNUMANodes)
	if nodes < 2 {
		return nil
	}
	var args []string
	for k := 0; k < nodes; k++ {
		size := mem
		if k > 0 {
			size = numaExtra
		}
		node := fmt.Sprintf("node,nodeid=%d,memdev=ffmem%d", k, k)
		if k == 0 {
			node += fmt.Sprintf(",cpus=0-%d", cpus-1)
		}
		args = append(args, "-object", fmt.Sprintf("memory-backend-ram,id=ffmem%d,size=%dM", k, size), "-numa", node)
	}
	return args
}

func (q qemu) commandLine(t *Target, sock string) string {
	return t.cfg.QEMU + " " + strings.Join(q.args(t, sock), " ")
}

// qmpPath is the QMP socket beside the agent's socket sock.
func qmpPath(sock string) string { return filepath.Join(filepath.Dir(sock), "q") }

func (q qemu) start(t *Target, sock string, console *os.File, extra ...string) (vmProcess, error) {
	c := t.cfg
	cmd := c.Command(c.QEMU, append(q.args(t, sock), extra...)...)
	cmd.Stdout = console
	p := &qemuProcess{cmd: cmd, stderr: &limitedBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start QEMU (%s): %w", c.QEMU, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (qemu) dial(sock string) (net.Conn, error) { return net.Dial("unix", sock) }

// qemuProcess is a running QEMU.
type qemuProcess struct {
	cmd    *exec.Cmd
	stderr *limitedBuffer
	done   chan struct{}
	err    error // valid once done is closed
}

func (p *qemuProcess) exited() <-chan struct{} { return p.done }
func (p *qemuProcess) exitErr() error          { return p.err }
func (p *qemuProcess) kill()                   { p.cmd.Process.Kill() }
func (p *qemuProcess) diagnostics() string     { return strings.TrimSpace(p.stderr.String()) }

func (p *qemuProcess) signaled() bool {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
	}
	return false
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
