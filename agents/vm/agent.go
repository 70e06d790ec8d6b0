package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// AgentConfig is what the host tells the guest agent, in the initramfs at
// AgentConfigPath.
type AgentConfig struct {
	Port     string   `json:"port"`    // virtio-serial port name
	Modules  []string `json:"modules"` // guest paths of modules to load, dependencies first
	Setup    []Step   `json:"setup,omitempty"`
	ForkMode []Step   `json:"fork_mode,omitempty"`
	// ProgramTimeoutMs bounds one program in the guest executor.
	ProgramTimeoutMs int `json:"program_timeout_ms"`
}

// Guest paths.
const (
	AgentConfigPath = "/etc/forkfuzz/agent.json"
	AgentBinary     = "/forkfuzz"
)

// AgentMain is `forkfuzz vm-agent`. As PID 1 it mounts the pseudo file
// systems, then runs the agent proper as its child (restarting it if it
// ever dies) and reaps every orphan; PID 1 never returns. Run as another
// PID, it serves the host (the child's role). It returns only on a usage
// error.
func AgentMain(args []string) error {
	if len(args) > 0 && args[0] == "--exec-executor" {
		return execExecutor(args[1:])
	}
	if os.Getpid() == 1 {
		initMain()
	}
	err := serve()
	consolef("vm-agent: %v", err)
	return err
}

func consolef(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "forkfuzz: "+format+"\n", args...)
}

// initMain is PID 1. It never returns.
func initMain() {
	for _, m := range []struct{ src, dst, fstype string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"debugfs", "/sys/kernel/debug", "debugfs"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2"},
		{"tmpfs", "/tmp", "tmpfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fstype, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			consolef("init: mount %s on %s: %v", m.fstype, m.dst, err)
		}
	}
	if fd, err := unix.Open("/dev/console", unix.O_RDWR, 0); err == nil {
		for i := 0; i < 3; i++ {
			unix.Dup2(fd, i)
		}
		if fd > 2 {
			unix.Close(fd)
		}
	}
	setupMemKinds()
	setupFileSystems()
	os.Setenv("PATH", "/bin:/sbin:/usr/bin:/usr/sbin")
	os.Setenv("HOME", "/")
	os.Setenv("TMPDIR", "/tmp")
	self := AgentBinary
	if _, err := os.Stat(self); err != nil {
		self, _ = os.Executable()
	}
	var child int
	start := func() {
		pid, err := syscall.ForkExec(self, []string{self, "vm-agent"}, &syscall.ProcAttr{
			Env: os.Environ(), Files: []uintptr{0, 1, 2},
		})
		if err != nil {
			consolef("init: start agent: %v", err)
			child = 0
			return
		}
		child = pid
	}
	start()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
		case err != nil:
			if child == 0 {
				time.Sleep(time.Second)
				start()
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		case pid == child:
			consolef("init: agent exited (status %v); restarting it", ws)
			time.Sleep(time.Second)
			start()
		}
	}
}

// execExecutor makes the fork-mode prctl calls in this process, then
// becomes the executor (the prctl state of the process is what a fork
// implementation toggle acts on). Args: "OPT,ARG2,..." per call.
func execExecutor(args []string) error {
	for _, a := range args {
		var v [5]uintptr
		for i, f := range strings.Split(a, ",") {
			x, err := strconv.ParseUint(f, 0, 64)
			if err != nil || i >= len(v) {
				return fmt.Errorf("bad prctl %q", a)
			}
			v[i] = uintptr(x)
		}
		if _, _, e := unix.Syscall6(unix.SYS_PRCTL, v[0], v[1], v[2], v[3], v[4], 0); e != 0 {
			// The executor cannot run in the requested mode: report it on
			// stderr (the console) and fail, so the host sees a harness error.
			consolef("fork-mode prctl %s: %v", a, e)
			os.Exit(3)
		}
	}
	self, _ := os.Executable()
	return syscall.Exec(self, []string{self, "executor"}, os.Environ())
}

type agent struct {
	cfg    AgentConfig
	port   *os.File
	wmu    sync.Mutex
	remote *executor.Remote
	// warnOnce is the kernel's clear_warn_once, open (nil: absent).
	warnOnce *os.File
}

// clearWarnOncePath re-arms the kernel's once-only reports (WARN_ON_ONCE,
// WARN_ONCE, printk_once) when 1 is written to it (Linux 4.15 and later,
// with debugfs).
var clearWarnOncePath = "/sys/kernel/debug/clear_warn_once"

// openWarnOnce opens clearWarnOncePath and says, for the hello's steps,
// what that means for replays.
func (a *agent) openWarnOnce() string {
	f, err := os.OpenFile(clearWarnOncePath, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Sprintf("once-only warnings: cannot re-arm them (%v): a WARN_ON_ONCE fires once per boot of a VM, so a finding's replays on the VM it fired in cannot show it again", err)
	}
	a.warnOnce = f
	return "once-only warnings: re-armed before every program (" + clearWarnOncePath + "): every program that reaches a WARN_ON_ONCE reports it"
}

// rearmWarnings re-arms the kernel's once-only reports before a program,
// so that whether a program warns does not depend on what ran before it
// on this VM: the minimizer's tries and a finding's replays on the VM
// that warned see the warning again. After a failed write it stops
// trying (the error is said once).
func (a *agent) rearmWarnings() error {
	if a.warnOnce == nil {
		return nil
	}
	// A plain write: debugfs attributes are opened nonseekable, so a
	// pwrite fails (ESPIPE).
	if _, err := a.warnOnce.Write([]byte("1\n")); err != nil {
		a.warnOnce.Close()
		a.warnOnce = nil
		return err
	}
	return nil
}

func serve() error {
	var cfg AgentConfig
	b, err := os.ReadFile(AgentConfigPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", AgentConfigPath, err)
	}
	for _, m := range cfg.Modules {
		if err := loadModule(m); err != nil {
			consolef("%v", err)
		}
	}
	dev, err := findPort(cfg.Port, 30*time.Second)
	if err != nil {
		return err
	}
	port, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	a := &agent{cfg: cfg, port: port}
	a.remote = &executor.Remote{Command: a.executorCommand, Stderr: os.Stderr, DumpGoroutines: true,
		Timeout: time.Duration(cfg.ProgramTimeoutMs) * time.Millisecond}
	var steps []string
	for _, s := range cfg.Setup {
		res := "ok"
		if err := a.step(s); err != nil {
			res = err.Error()
		}
		steps = append(steps, "setup: "+s.String()+": "+res)
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	uname := unix.ByteSliceToString(uts.Release[:]) + " " + unix.ByteSliceToString(uts.Version[:])
	steps = append(steps, "fork-implementation knobs: "+executor.ForkImplKnobs())
	steps = append(steps, a.openWarnOnce())
	// Start the executor now rather than at the first program: a VM
	// restored from the state saved after this hello (snapshot.go) then
	// has it running.
	if p, err := prog.Parse([]byte(warmup)); err == nil {
		t0 := time.Now()
		if _, err := a.remote.Run(p, executor.Options{}); err != nil {
			steps = append(steps, "executor: not started before hello: "+err.Error())
		} else {
			steps = append(steps, fmt.Sprintf("executor: started in %v", time.Since(t0).Round(time.Millisecond)))
		}
	}
	if err := a.send(&Msg{Type: MsgHello, Uname: uname, Uptime: uptime(), Steps: steps, ForkImpls: executor.AvailableForkImpls(),
		FileSystems: executor.AvailableFileSystems()}); err != nil {
		return err
	}
	go func() {
		for {
			time.Sleep(time.Second)
			a.send(&Msg{Type: MsgProgress, Uptime: uptime()})
		}
	}()
	r := bufio.NewReaderSize(retryReader{port}, 1<<16)
	for {
		m, err := ReadMsg(r)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				consolef("%v", err)
				continue
			}
			return err
		}
		switch m.Type {
		case MsgRun:
			a.send(a.run(m))
		case MsgBench:
			a.send(benchInGuest(m))
		default:
			consolef("unexpected %s message from the host", m.Type)
		}
	}
}

func (a *agent) send(m *Msg) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return WriteMsg(a.port, m)
}

func (a *agent) executorCommand() *exec.Cmd {
	self := AgentBinary
	var prctls []string
	for _, s := range a.cfg.ForkMode {
		if s.Kind == "prctl" {
			prctls = append(prctls, strings.Join(s.Args, ","))
		}
	}
	cmd := exec.Command(self, "executor")
	if len(prctls) > 0 {
		cmd = exec.Command(self, append([]string{"vm-agent", "--exec-executor"}, prctls...)...)
	}
	// A goroutine dump (SIGQUIT, Remote.DumpGoroutines; a fatal error)
	// includes the goroutines running on other threads; the guest
	// writes no core file (RLIMIT_CORE is 0 for init's children).
	cmd.Env = []string{"GOTRACEBACK=crash"}
	return cmd
}

// warmup is a trivial program that makes the executor process exist, so
// fork-mode steps can name it as /proc/executor.
const warmup = "forkfuzz v1\nregion r0 anon-private pages=1 thp=default\ncheck\n"

func (a *agent) run(m *Msg) *Msg {
	reply := &Msg{Type: MsgResult, ID: m.ID}
	p, err := prog.Parse([]byte(m.Program))
	if err != nil {
		reply.Err = "guest: " + err.Error()
		return reply
	}
	if m.HoldMs > 0 {
		time.Sleep(time.Duration(m.HoldMs) * time.Millisecond)
	}
	if m.TestRead != "" {
		b, err := os.ReadFile(m.TestRead)
		if err != nil {
			reply.Text = "error: " + err.Error()
		} else {
			reply.Text = string(b)
		}
	}
	if m.TestPath != "" {
		// A crash trigger never returns: do not wait for it.
		done := make(chan error, 1)
		go func() { done <- os.WriteFile(m.TestPath, []byte(m.TestValue), 0) }()
		select {
		case err := <-done:
			if err != nil {
				reply.Err = "test write: " + err.Error()
				return reply
			}
		case <-time.After(10 * time.Second):
		}
	}
	for _, s := range a.cfg.ForkMode {
		if s.Kind == "prctl" {
			continue
		}
		if err := a.step(s); err != nil {
			reply.Err = fmt.Sprintf("fork-mode step %q: %v", s.String(), err)
			return reply
		}
	}
	var opt executor.Options
	if m.Options != nil {
		opt = *m.Options
	}
	if err := a.rearmWarnings(); err != nil {
		a.send(&Msg{Type: MsgLog, Text: "guest: could not re-arm once-only warnings before the program (" + err.Error() + "), and will not try again: from now on a warning an earlier program fired once may stay silent"})
	}
	raw, phases, err := a.remote.RunRaw(p, opt)
	t1 := time.Now()
	if e := dropLazyMMs(); e != nil {
		a.send(&Msg{Type: MsgLog, Text: "guest: could not visit every CPU after the program (" + e.Error() + "): a report from an exited process's mm may show up during the next program"})
	}
	var ce *executor.CrashError
	switch {
	case errors.As(err, &ce):
		reply.Crash = &Crash{Hang: ce.Hang, Status: ce.Status, Lost: ce.Lost, Stderr: ce.Stderr, State: ce.State}
	case err != nil:
		reply.Err = err.Error()
	default:
		// The executor's encoding, forwarded as it is (RunRaw); the
		// phases go beside it, with the agent's own steps after the run.
		reply.Observation = raw
		phases["agent"] += time.Since(t1).Microseconds()
		reply.Phases = phases
	}
	return reply
}

// dropLazyMMs runs the calling thread once on every CPU the agent may
// use. A CPU that went idle right after one of the program's processes
// exited keeps that process's mm as its lazy TLB mm until it next switches
// to a user task; only then is the mm freed and checked (check_mm: "BUG:
// Bad rss-counter state", "BUG: non-zero pgtables_bytes on freeing mm").
// Without this, such a report could appear during the next program and be
// blamed on it. (A guard, not a fix of an observed failure: on the
// rss-thp mutant, 40 rounds of TestQEMUReportOnItsRun without it and
// alternating runs of a reporting and a quiet program never showed a
// report one run late; it costs one affinity change per CPU and one to restore.)
func dropLazyMMs() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	var first error
	for cpu := 0; cpu < len(orig)*64; cpu++ {
		if !orig.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		// Setting the affinity migrates the thread to that CPU at once:
		// the switch from its idle task drops the lazy mm.
		if err := unix.SchedSetaffinity(0, &one); err != nil && first == nil {
			first = fmt.Errorf("sched_setaffinity to CPU %d: %w", cpu, err)
		}
	}
	if err := unix.SchedSetaffinity(0, &orig); err != nil && first == nil {
		first = fmt.Errorf("restore affinity: %w", err)
	}
	return first
}

// step runs one set-up or fork-mode step in the guest.
func (a *agent) step(s Step) error {
	switch s.Kind {
	case "write":
		path := s.Args[0]
		if rest, ok := strings.CutPrefix(path, "/proc/executor/"); ok {
			pid, err := a.executorPID()
			if err != nil {
				return err
			}
			path = fmt.Sprintf("/proc/%d/%s", pid, rest)
		}
		return os.WriteFile(path, []byte(s.Args[1]), 0o644)
	case "run":
		out, err := exec.Command(s.Args[0], s.Args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return fmt.Errorf("step %q cannot run here", s.Kind)
}

// executorPID finds the executor process (a child of this agent), starting
// it with a trivial program if needed.
func (a *agent) executorPID() (int, error) {
	for try := 0; try < 2; try++ {
		if pid := childPID(); pid > 0 {
			return pid, nil
		}
		p, err := prog.Parse([]byte(warmup))
		if err != nil {
			return 0, err
		}
		if _, err := a.remote.Run(p, executor.Options{}); err != nil {
			return 0, fmt.Errorf("start executor: %w", err)
		}
	}
	return 0, errors.New("no executor process")
}

func childPID() int {
	me := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return pid
		}
	}
	return 0
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
		return fmt.Errorf("load module %s: %w", path, err)
	}
	return nil
}

// findPort finds the virtio-serial port named name under
// /sys/class/virtio-ports (no udev here) and returns its device node,
// creating it if devtmpfs did not.
func findPort(name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil || strings.TrimSpace(string(b)) != name {
				continue
			}
			dir := filepath.Dir(n)
			dev := "/dev/" + filepath.Base(dir)
			if _, err := os.Stat(dev); err == nil {
				return dev, nil
			}
			b, err = os.ReadFile(filepath.Join(dir, "dev"))
			if err != nil {
				return "", err
			}
			var maj, mnr uint32
			if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &mnr); err != nil {
				return "", fmt.Errorf("%s/dev: %q", dir, b)
			}
			if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(maj, mnr))); err != nil {
				return "", fmt.Errorf("mknod %s: %w", dev, err)
			}
			return dev, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %q under /sys/class/virtio-ports after %v (found %v; is CONFIG_VIRTIO_CONSOLE on, or its module loaded?)", name, timeout, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func uptime() float64 {
	b, _ := os.ReadFile("/proc/uptime")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// retryReader reads a virtio-serial port, which reads as end-of-file while
// the host side is not connected: it waits instead.
type retryReader struct{ f *os.File }

func (r retryReader) Read(b []byte) (int, error) {
	for {
		n, err := r.f.Read(b)
		if n > 0 {
			return n, nil
		}
		if err != nil && err != io.EOF {
			return 0, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
