package vm

// A VM as the pool sees it: booting (hello from the guest agent), running
// one program at a time over the agent connection, watching the console
// and the hypervisor's process. What is particular to a hypervisor (its
// command line, how its process starts and ends, how the agent channel is
// reached) is behind the hypervisor interface; QEMU (qemu.go) is the one
// forkfuzz has.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/kernel/report"
)

// hypervisor starts VMs. Adding a second one is a file implementing it
// (and its vmProcess) plus a case in Target.hypervisor: the boot protocol,
// the console, hang and report handling are the instance's.
type hypervisor interface {
	// name is how messages call it ("QEMU").
	name() string
	// start starts VM of t whose guest agent listens on the channel
	// reachable at sock (a path the instance made; the hypervisor may
	// create it) and whose serial console goes to console.
	// extra arguments follow the VM's own (a saved state to load).
	start(t *Target, sock string, console *os.File, extra ...string) (vmProcess, error)
	// dial connects to the guest agent's channel of a started VM; it
	// fails until the hypervisor has created it.
	dial(sock string) (net.Conn, error)
	// commandLine is the command that start runs, for reproducing a
	// boot by hand.
	commandLine(t *Target, sock string) string
}

// vmProcess is a running hypervisor process.
type vmProcess interface {
	exited() <-chan struct{} // closed when it has exited
	exitErr() error          // its exit (nil: status 0), once exited is closed
	// signaled: it died of a signal (once exited is closed).
	signaled() bool
	kill()
	// diagnostics is what it said on its error output, trimmed.
	diagnostics() string
}

// hypervisor is the hypervisor the target boots its VMs with.
func (t *Target) hypervisor() hypervisor { return qemu{} }

// CommandLine is the command line VM idx would run, for reproducing a boot
// by hand.
func (t *Target) CommandLine() string { return t.hypervisor().commandLine(t, "SOCKET") }

// instance is one VM: a hypervisor's process, its console and its agent
// connection. It is used by one goroutine at a time (the pool hands it
// out).
type instance struct {
	idx int
	t   *Target

	proc    vmProcess // nil: not running
	sockDir string
	conn    net.Conn
	msgs    chan *Msg
	readErr chan error
	quit    chan struct{} // closed by stop: the connection's reader exits
	con     *console
	pipe    *pipeCapture
	mark    int64 // console offset up to which reports were attributed
	nextID  uint64
	uname   string
	steps   []string
	impls   []string
	fss     []string // file systems of the file region kinds (the hello's)
	boots   int
	sock    string // the agent's socket of the running VM
	started time.Time
	// deadline bounds the current boot (BootTimeout from its start).
	deadline time.Time
	ran      bool
}

// BootError is a harness error: a VM did not reach the agent's hello.
// Console is the console's tail; Report the kernel report in it, if any.
type BootError struct {
	VM      int
	Reason  string
	Console string
	Report  string
	// Kind is the report's kind ("" without a report).
	Kind    report.Kind
	Command string
}

func (e *BootError) Error() string {
	s := fmt.Sprintf("vm %d: boot failed: %s", e.VM, e.Reason)
	if e.Report != "" {
		s += " (console shows: " + e.Report + ")"
	}
	if e.Console != "" {
		s += "\n--- console tail ---\n" + lastBytes([]byte(e.Console), 2000)
	}
	return s
}

func (in *instance) running() bool {
	if in.proc == nil {
		return false
	}
	select {
	case <-in.proc.exited():
		return false
	default:
		return true
	}
}

// bootAttempts is how many times a VM is booted before its boot failure
// is reported: a TCG guest on an overloaded host occasionally stalls
// early in boot (silently, or with an RCU stall report: its vCPUs did not
// get the host's CPUs).
const bootAttempts = 2

// bootSilence: a cold boot whose console stays silent this long before
// the agent's hello has stalled (a boot prints all along: the kernel,
// then the agent's set-up steps; 10-45 s in all under TCG) and is
// retried instead of waiting out the boot timeout; not where the
// command line quiets the console (quietConsole).
var bootSilence = 2 * time.Minute // a variable for the fake tests

// quietConsole: the kernel command line keeps boot messages off the
// console, so silence says nothing about a stall.
func quietConsole(cmdline string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == "quiet" || strings.HasPrefix(f, "loglevel=") || strings.HasPrefix(f, "console=") && f != "console=ttyS0" {
			return true
		}
	}
	return false
}

// boot boots the VM, retrying a boot that timed out or broke.
func (in *instance) boot() error {
	var err error
	for i := 0; i < bootAttempts; i++ {
		err = in.boot1()
		var be *BootError
		if err == nil || !errors.As(err, &be) || (be.Report != "" && be.Kind != report.Hang) {
			return err // booted, QEMU would not start, or the kernel reported why
		}
		fmt.Fprintf(in.t.cfg.Log, "vm %d: boot attempt %d failed: %s\n", in.idx, i+1, be.Reason)
	}
	return err
}

// boot1 starts the VM and waits for the agent's hello, or loads the
// state saved after an earlier boot's hello (snapshot.go) and waits for
// the agent's first heartbeat. A restore that fails is said in the log
// and followed by a cold boot.
func (in *instance) boot1() error {
	meta := in.t.snap.saved()
	if meta != nil {
		err := in.start(in.t.snap.statePath())
		if err == nil {
			err = in.restored(meta)
		}
		if err == nil {
			return nil
		}
		fmt.Fprintf(in.t.cfg.Log, "vm %d: could not load the saved state %s (%v): booting cold\n", in.idx, in.t.snap.statePath(), err)
		in.t.snap.restoreFailed(err)
	}
	if err := in.start(""); err != nil {
		return err
	}
	return in.hello()
}

// start starts the hypervisor (loading the saved state at state, if
// any) and connects to the agent's channel.
func (in *instance) start(state string) error {
	in.stop()
	c := in.t.cfg
	in.boots++
	dir := filepath.Join(c.Workdir, fmt.Sprintf("vm-%d", in.idx))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("vm %d: %w", in.idx, err)
	}
	// Unix socket paths are short: keep the socket in a short temp dir.
	sockDir, err := os.MkdirTemp("", "ffvm")
	if err != nil {
		return fmt.Errorf("vm %d: %w", in.idx, err)
	}
	in.sockDir = sockDir
	in.sock = filepath.Join(sockDir, "s")
	in.con = newConsole(filepath.Join(dir, "console.log"))
	how := ""
	if state != "" {
		how = " (loading the state saved after boot: " + state + ")"
	}
	fmt.Fprintf(in.con, "\n=== forkfuzz: boot %d of vm %d at %s%s ===\n", in.boots, in.idx, time.Now().UTC().Format(time.RFC3339), how)
	in.mark = in.con.Len()
	hv := in.t.hypervisor()
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("vm %d: %w", in.idx, err)
	}
	in.started = time.Now()
	in.ran = false
	in.pipe = nil
	var extra []string
	if state != "" {
		extra = []string{"-incoming", "exec:cat " + state}
	}
	proc, err := hv.start(in.t, in.sock, pw, extra...)
	pw.Close()
	if err != nil {
		pr.Close()
		in.stop()
		return fmt.Errorf("vm %d: %w", in.idx, err)
	}
	in.pipe = capturePipe(pr, in.con)
	in.proc = proc
	in.deadline = time.Now().Add(c.BootTimeout)
	for {
		conn, err := hv.dial(in.sock)
		if err == nil {
			in.conn = conn
			break
		}
		select {
		case <-proc.exited():
			return in.bootErr(fmt.Sprintf("%s exited (%v) before its socket was ready: %s", hv.name(), proc.exitErr(), proc.diagnostics()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(in.deadline) || time.Since(in.started) > 30*time.Second {
			return in.bootErr(fmt.Sprintf("%s did not create its agent socket within 30s", hv.name()))
		}
	}
	in.msgs = make(chan *Msg, 16)
	in.readErr = make(chan error, 1)
	in.quit = make(chan struct{})
	go readMsgs(in.conn, state != "", in.msgs, in.readErr, in.quit)
	return nil
}

// readMsgs reads the agent's messages until the connection breaks. A
// restored VM may first deliver the tail of a message the saved guest
// had begun: skip to the first frame.
func readMsgs(conn net.Conn, resync bool, msgs chan *Msg, errs chan error, quit chan struct{}) {
	r := bufio.NewReaderSize(conn, 1<<16)
	if resync {
		if err := skipToFrame(r); err != nil {
			errs <- err
			return
		}
	}
	for {
		m, err := ReadMsg(r)
		if err != nil {
			errs <- err
			return
		}
		select {
		case msgs <- m:
		case <-quit:
			return
		}
	}
}

// bootErr stops the VM and describes why it did not boot.
func (in *instance) bootErr(reason string) error {
	if in.pipe != nil {
		in.pipe.catchUp(100 * time.Millisecond)
	}
	tail := string(in.con.Tail(16 << 10))
	e := &BootError{VM: in.idx, Reason: reason, Console: tail, Command: in.t.hypervisor().commandLine(in.t, in.sock)}
	if r := scanReports([]byte(tail)); r != nil {
		e.Report, e.Kind = r.Title, r.Kind
	}
	in.stop()
	return e
}

// hello waits for a cold-booted agent's hello, then saves the VM's state
// for later boots where none is saved yet.
func (in *instance) hello() error {
	c := in.t.cfg
	hv := in.t.hypervisor()
	timer := time.NewTimer(time.Until(in.deadline))
	defer timer.Stop()
	tick := time.NewTicker(bootSilence / 8)
	defer tick.Stop()
	printed, heard := in.con.Len(), time.Now()
	for {
		select {
		case <-tick.C:
			if quietConsole(c.Cmdline) {
				continue
			}
			if n := in.con.Len(); n != printed {
				printed, heard = n, time.Now()
			} else if time.Since(heard) >= bootSilence {
				return in.bootErr(fmt.Sprintf("the guest printed nothing for %v before its agent's hello (a stalled boot)", bootSilence))
			}
		case m := <-in.msgs:
			if m.Type != MsgHello {
				continue
			}
			d := time.Since(in.started)
			meta := snapMeta{Uname: m.Uname, Steps: m.Steps, Impls: m.ForkImpls, FileSystems: m.FileSystems, Boot: d}
			cons := in.ready(meta, d, fmt.Sprintf("booted %s under %s in %v", strings.Fields(m.Uname + " ?")[0], in.t.accel, d.Round(time.Millisecond)))
			meta.Console = string(cons)
			in.saveState(meta)
			return nil
		case err := <-in.readErr:
			<-waitOr(in.proc.exited(), 5*time.Second)
			return in.bootErr(fmt.Sprintf("agent connection broke during boot: %v (%s: %v)", err, hv.name(), in.exitStatus()))
		case <-in.proc.exited():
			return in.bootErr(fmt.Sprintf("%s exited during boot (%v) %s", hv.name(), in.proc.exitErr(), in.proc.diagnostics()))
		case <-timer.C:
			return in.bootErr(fmt.Sprintf("no hello from the agent within %v", c.BootTimeout))
		}
	}
}

// restored runs a VM that is loading a saved state and waits for the
// agent's first message.
func (in *instance) restored(meta *snapMeta) error {
	if err := resume(qmpPath(in.sock), min(time.Until(in.deadline), restoreTimeout)); err != nil {
		in.stop()
		return err
	}
	timer := time.NewTimer(min(time.Until(in.deadline), restoreTimeout))
	defer timer.Stop()
	select {
	case <-in.msgs:
	case err := <-in.readErr:
		in.stop()
		return &slowRestore{fmt.Errorf("agent connection broke: %v", err)}
	case <-in.proc.exited():
		err := fmt.Errorf("QEMU exited (%v) %s", in.proc.exitErr(), in.proc.diagnostics())
		in.stop()
		return err
	case <-timer.C:
		in.stop()
		return &slowRestore{fmt.Errorf("no message from the restored agent within %v", restoreTimeout)}
	}
	d := time.Since(in.started)
	in.t.mu.Lock()
	in.t.Restores++
	in.t.mu.Unlock()
	// The saved boot's console, so that what reads a VM's console for
	// its boot messages (a mutant's "planted" line) finds them.
	in.pipe.catchUp(100 * time.Millisecond)
	fmt.Fprintf(in.con, "=== forkfuzz: the console of the boot whose state was loaded (saved %s) ===\n%s=== forkfuzz: end of the saved boot's console ===\n",
		meta.Saved.Format(time.RFC3339), meta.Console)
	in.ready(*meta, d, fmt.Sprintf("restored %s under %s in %v from the state saved after a %v boot", strings.Fields(meta.Uname + " ?")[0], in.t.accel, d.Round(time.Millisecond), meta.Boot.Round(time.Millisecond)))
	return nil
}

// restoreTimeout bounds the load of a saved state (about a second) and
// then the wait for the restored agent's first heartbeat (it sends one
// a second): a restore that stalls falls back to a cold boot instead of
// spending the whole boot timeout.
const restoreTimeout = 30 * time.Second

// ready records a VM that is up: what its agent said, the time it took,
// the boot's console reports and set-up steps in the log.
func (in *instance) ready(meta snapMeta, d time.Duration, line string) (console []byte) {
	c := in.t.cfg
	in.t.mu.Lock()
	in.uname, in.steps, in.impls, in.fss = meta.Uname, meta.Steps, meta.Impls, meta.FileSystems
	in.t.Boots = append(in.t.Boots, d)
	in.t.mu.Unlock()
	fmt.Fprintf(c.Log, "vm %d: %s\n", in.idx, line)
	// Reports printed while booting belong to no program: log them, and
	// start attributing console output from here.
	in.pipe.catchUp(100 * time.Millisecond)
	cons, end := in.con.Since(in.mark)
	in.mark = end
	dir := filepath.Join(c.Workdir, fmt.Sprintf("vm-%d", in.idx))
	for _, r := range report.Parse(cons) {
		fmt.Fprintf(c.Log, "vm %d: the kernel reported while booting: %s (see %s)\n", in.idx, r.Title, filepath.Join(dir, "console.log"))
	}
	for _, s := range in.steps {
		fmt.Fprintf(c.Log, "vm %d: %s\n", in.idx, s)
	}
	return cons
}

// saveState saves a freshly booted VM's state unless one is saved (or
// snapshots are off), and says so.
func (in *instance) saveState(meta snapMeta) {
	sn := in.t.snap
	if sn == nil || sn.off != "" || in.t.snap.saved() != nil {
		return
	}
	meta.Saved = time.Now().UTC()
	t0 := time.Now()
	size, err := sn.save(qmpPath(in.sock), meta)
	if err != nil {
		fmt.Fprintf(in.t.cfg.Log, "vm %d: could not save the booted state (later boots are cold): %v\n", in.idx, err)
		return
	}
	fmt.Fprintf(in.t.cfg.Log, "vm %d: saved the booted state for restarts and later runs (%d MB in %v): %s\n",
		in.idx, size>>20, time.Since(t0).Round(time.Millisecond), sn.statePath())
}

func waitOr(ch <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-time.After(d):
		}
		close(out)
	}()
	return out
}

func (in *instance) exitStatus() string {
	if in.proc == nil {
		return "not running"
	}
	select {
	case <-in.proc.exited():
		if err := in.proc.exitErr(); err != nil {
			return err.Error()
		}
		return "exited with status 0"
	default:
		return "still running"
	}
}

// killedFromOutside: the hypervisor died of a signal it did not ask for
// (the guest cannot make it die of a signal; a guest reboot or power-off
// is a normal exit).
func (in *instance) killedFromOutside() bool {
	if in.proc == nil {
		return false
	}
	select {
	case <-in.proc.exited():
		return in.proc.signaled()
	default:
		return false
	}
}

// stop kills the VM and forgets the connection.
func (in *instance) stop() {
	if in.quit != nil {
		close(in.quit)
		in.quit = nil
	}
	if in.conn != nil {
		in.conn.Close()
		in.conn = nil
	}
	if in.proc != nil {
		in.proc.kill()
		<-waitOr(in.proc.exited(), 10*time.Second)
	}
	in.proc = nil
	if in.sockDir != "" {
		os.RemoveAll(in.sockDir)
		in.sockDir = ""
	}
	if in.con != nil {
		in.con.Close()
	}
}

// run sends one program and waits for its result, watching the console,
// the heartbeat and the hypervisor's process.
func (in *instance) run(p *prog.Program, opt agents.Options, tt testHooks) (*obs.Observation, error) {
	holdMs := tt.holdMs
	c := in.t.cfg
	in.nextID++
	id := in.nextID
	text := string(p.Format())
	start := in.mark
	kerr := func(kind, title, rep string, restart bool) *KernelReportError {
		cons, end := in.con.Since(start)
		in.mark = end
		e := &KernelReportError{Title: title, Kind: kind, Report: rep, Console: lastBytes(cons, 256<<10),
			VM: in.idx, Kernel: c.Kernel + " (" + in.uname + ")", Program: text, Restarted: restart}
		e.Steps = append(append(e.Steps, in.steps...), in.t.forkMod...)
		return e
	}
	fromReport := func(r *report.Report, restart bool) *KernelReportError {
		return kerr(string(r.Kind), r.Title, r.Text, restart)
	}
	// vmDown handles QEMU's exit or a broken connection mid-program.
	hvName := in.t.hypervisor().name()
	vmDown := func(why string) error {
		<-waitOr(in.proc.exited(), 10*time.Second)
		in.pipe.wait(2 * time.Second)
		cons, _ := in.con.Since(start)
		r := scanReports(cons)
		outside := in.killedFromOutside()
		status := in.exitStatus()
		var err error
		switch {
		case r != nil:
			err = fromReport(r, true)
		case outside:
			in.mark = in.con.Len()
			err = fmt.Errorf("vm %d: %s was killed from outside (%s) while running a program; the VM will be restarted (harness event, not a finding)", in.idx, hvName, status)
		default:
			err = kerr("lost-connection", "lost connection to VM", "", true)
			err.(*KernelReportError).Report = fmt.Sprintf("%s; %s %s; no kernel report on the console", why, hvName, status)
		}
		in.stop()
		return err
	}
	in.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	// The program's time: the caller's, or ProgramTimeout scaled with
	// what the program does and the guest's measured pace. The guest's
	// executor gets the same bound.
	weight := programWeight(p)
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = in.t.pace.timeout(c.ProgramTimeout, weight)
	}
	opt.Timeout = timeout
	eo := opt.Executor()
	sent := time.Now()
	if err := WriteMsg(in.conn, &Msg{Type: MsgRun, ID: id, Program: text, Options: &eo, HoldMs: holdMs, TestPath: tt.path, TestValue: tt.value, TestRead: tt.read}); err != nil {
		return nil, vmDown(fmt.Sprintf("sending the program failed: %v", err))
	}
	hang := time.NewTimer(c.HangTimeout)
	defer hang.Stop()
	overall := time.NewTimer(timeout + c.HangTimeout + time.Duration(holdMs)*time.Millisecond)
	defer overall.Stop()
	// A report that killed a task (a BUG_ON's Oops) often leaves the
	// program stuck on a lock the dead task held while the guest's
	// heartbeat goes on: waiting out the program's timeout would cost
	// a minute or two per such run (every minimization and replay run
	// of such a finding). The console is watched; CrashGrace after such
	// a report the run ends with it and the VM restarts.
	watch := time.NewTicker(500 * time.Millisecond)
	defer watch.Stop()
	var grace <-chan time.Time
	for {
		select {
		case <-watch.C:
			if grace != nil {
				continue
			}
			if r := killingReport(in.con, start); r != nil {
				fmt.Fprintf(c.Log, "vm %d: %s (the kernel killed a task) during a program: waiting %v for its result, then restarting\n", in.idx, r.Title, c.CrashGrace)
				grace = time.After(c.CrashGrace)
			}
		case <-grace:
			return nil, in.hung(start, fmt.Sprintf("no result within %v of a kernel report that killed a task", c.CrashGrace), kerr, fromReport)
		case m := <-in.msgs:
			if !hang.Stop() {
				select {
				case <-hang.C:
				default:
				}
			}
			hang.Reset(c.HangTimeout)
			if m.Type == MsgLog {
				// The agent's word on something the run could not do.
				fmt.Fprintf(c.Log, "vm %d: %s\n", in.idx, m.Text)
			}
			if m.Type != MsgResult || m.ID != id {
				continue
			}
			if tt.readOut != nil {
				*tt.readOut = m.Text
			}
			if !in.ran {
				in.ran = true
				if in.idx == 0 && in.boots == 1 {
					in.t.mu.Lock()
					in.t.FirstProg = time.Since(in.started)
					in.t.mu.Unlock()
				}
			}
			if m.Crash == nil && m.Err == "" && holdMs == 0 {
				in.t.pace.record(weight, time.Since(sent))
			}
			return in.result(m, len(p.Ops), start, fromReport)
		case err := <-in.readErr:
			return nil, vmDown(fmt.Sprintf("agent connection broke: %v", err))
		case <-in.proc.exited():
			return nil, vmDown(hvName + " exited")
		case <-hang.C:
			return nil, in.hung(start, fmt.Sprintf("no progress for %v", c.HangTimeout), kerr, fromReport)
		case <-overall.C:
			// The title (the signature) does not carry the scaled
			// timeout: one hang is one signature whatever its program.
			e := in.hung(start, "no result within the program timeout", kerr, fromReport)
			if ke, ok := e.(*KernelReportError); ok && ke.Kind == "hang" {
				ke.Report = fmt.Sprintf("no result within %v (program timeout %v: %v scaled with the program's weight %.0f and the guest's pace)", timeout+c.HangTimeout, timeout, c.ProgramTimeout, weight)
			}
			return nil, e
		}
	}
}

func (in *instance) hung(start int64, why string, kerr func(kind, title, rep string, restart bool) *KernelReportError, fromReport func(*report.Report, bool) *KernelReportError) error {
	in.pipe.catchUp(100 * time.Millisecond)
	cons, _ := in.con.Since(start)
	var e *KernelReportError
	if r := scanReports(cons); r != nil {
		e = fromReport(r, true)
	} else {
		e = kerr("hang", "VM hang: "+why, "", true)
	}
	in.stop()
	return e
}

// killingReport returns the first report on con since offset start that
// killed a task or stopped the kernel, or nil.
func killingReport(con *console, start int64) *report.Report {
	cons, _ := con.Since(start)
	if !report.Contains(cons) {
		return nil
	}
	for _, r := range report.Parse(cons) {
		if r.KillsTask() {
			return r
		}
	}
	return nil
}

// drowningReports: a program after which the console shows this many
// reports restarts the VM even if they are only warnings.
const drowningReports = 8

// result turns the agent's reply into what Run returns, with any kernel
// report the console shows since the program started.
func (in *instance) result(m *Msg, nops int, start int64, fromReport func(*report.Report, bool) *KernelReportError) (*obs.Observation, error) {
	in.pipe.catchUp(time.Second)
	cons, _ := in.con.Since(start)
	var kr *KernelReportError
	if r := scanReports(cons); r != nil {
		// A BUG or worse leaves the kernel suspect; so does a storm of
		// warnings: the next program (a replay, the minimizer's next
		// try) gets a freshly booted VM instead of a drowning one.
		restart := r.Fatal || (r.Kind != report.Warning && r.Kind != report.RSS) || len(report.Parse(cons)) >= drowningReports
		kr = fromReport(r, restart)
		if restart {
			in.stop()
		}
	} else {
		_, in.mark = in.con.Since(start)
	}
	switch {
	case m.Crash != nil:
		if kr != nil {
			return nil, kr
		}
		ce := &executor.CrashError{Hang: m.Crash.Hang, Status: "in vm: " + m.Crash.Status, Lost: m.Crash.Lost,
			Stderr: m.Crash.Stderr, State: m.Crash.State, Console: lastBytes(cons, 256<<10)}
		if oom := oomLines(cons); oom != "" {
			ce.Status += "; the guest's OOM killer acted: " + oom
		}
		return nil, ce
	case m.Err != "":
		if kr != nil {
			return nil, kr
		}
		return nil, executor.FromText(fmt.Sprintf("vm %d: ", in.idx), m.Err)
	}
	var o obs.Observation
	if err := json.Unmarshal(m.Observation, &o); err != nil {
		return nil, fmt.Errorf("vm %d: observation: %w", in.idx, err)
	}
	if len(o.Ops) != nops {
		return nil, fmt.Errorf("vm %d: observation: %d op results for %d ops", in.idx, len(o.Ops), nops)
	}
	if m.Phases != nil {
		o.Phases = m.Phases
	}
	for _, s := range in.t.forkMod {
		o.Events = append(o.Events, obs.NewEvent(obs.EvNote, "vm: %s", s))
	}
	if kr != nil {
		return &o, kr
	}
	return &o, nil
}

// oomLines returns the console's OOM-killer lines ("Out of memory: Killed
// process ...", "oom-kill:..."), joined, or "".
func oomLines(cons []byte) string {
	var out []string
	for _, l := range strings.Split(string(cons), "\n") {
		if strings.Contains(l, "Out of memory") || strings.Contains(l, "Killed process") || strings.Contains(l, "oom-kill:") {
			if i := strings.Index(l, "] "); i >= 0 && strings.HasPrefix(l, "[") {
				l = l[i+2:]
			}
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " | ")
}
