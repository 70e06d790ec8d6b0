package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// The fake QEMU is this test binary re-run with FORKFUZZ_FAKE_QEMU set: it
// serves the virtio-serial socket the way the guest agent would, prints a
// console on stdout, and misbehaves as its mode says. It lets the pool's
// timeouts and event classification be tested without QEMU (as vmtest
// does).
func TestMain(m *testing.M) {
	if mode := os.Getenv("FORKFUZZ_FAKE_QEMU"); mode != "" {
		fakeQEMU(mode, os.Getenv("FORKFUZZ_FAKE_SOCK"))
		os.Exit(0)
	}
	code := m.Run()
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
	os.Exit(code)
}

const fakeWarning = `[   42.101234] ------------[ cut here ]------------
[   42.101301] WARNING: CPU: 1 PID: 231 at mm/memory.c:1047 copy_pte_range+0x6d2/0x1140
[   42.101800] RIP: 0010:copy_pte_range+0x6d2/0x1140
[   42.103100] ---[ end trace 0000000000000000 ]---
`

const fakePanic = `[   50.000001] sysrq: Trigger a crash
[   50.000002] Kernel panic - not syncing: sysrq triggered crash
[   50.000003] CPU: 0 PID: 1 Comm: forkfuzz Not tainted 6.1.0 #1
[   50.000004] Kernel Offset: disabled
`

const fakeOops = `[   22.680438] ------------[ cut here ]------------
[   22.680675] kernel BUG at mm/rmap.c:2073!
[   22.681484] invalid opcode: 0000 [#1] PREEMPT SMP NOPTI
[   22.681984] CPU: 0 PID: 91 Comm: forkfuzz Tainted: G           O       6.1.192 #1
[   22.682289] RIP: 0010:try_to_migrate_one+0x9b4/0xa20
[   22.722898] ---[ end trace 0000000000000000 ]---
`

const fakeStall = `[   72.081073] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:
[   72.081073] rcu: 	1-...!: (0 ticks this GP) idle=8f4c/0/0x0 softirq=10/10 fqs=0
[   72.081073] NMI backtrace for cpu 1
[   72.081073] RIP: 0010:amd_e400_idle+0x39/0x40
`

func fakeQEMU(mode, sock string) {
	fmt.Println("[    0.000000] Linux version 6.1.0-fake")
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "qemu-system-x86_64: could not load kernel 'bzImage'")
		os.Exit(1)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	conn, err := l.Accept()
	if err != nil {
		os.Exit(1)
	}
	if mode == "silent" {
		time.Sleep(time.Hour)
	}
	if mode == "bootstall" {
		// An overloaded host starved the guest's vCPUs during boot.
		fmt.Print(fakeStall)
		time.Sleep(time.Hour)
	}
	if mode == "bootpanic" {
		fmt.Print(fakePanic)
		os.Exit(0)
	}
	if mode == "bootwarn" {
		fmt.Print(fakeWarning)
		mode = "ok"
	}
	WriteMsg(conn, &Msg{Type: MsgHello, Uname: "6.1.0-fake #1", Steps: []string{"setup: write /x 1: ok"}})
	r := bufio.NewReader(conn)
	for {
		m, err := ReadMsg(r)
		if err != nil {
			os.Exit(0)
		}
		if m.Type != MsgRun {
			continue
		}
		p, _ := prog.Parse([]byte(m.Program))
		reply := &Msg{Type: MsgResult, ID: m.ID}
		switch mode {
		case "hang":
			time.Sleep(time.Hour)
		case "oopsstuck":
			// A BUG_ON killed a task of the program; the rest waits
			// on its locks forever while the agent's heartbeat goes on.
			fmt.Print(fakeOops)
			for {
				WriteMsg(conn, &Msg{Type: MsgProgress})
				time.Sleep(200 * time.Millisecond)
			}
		case "panic":
			fmt.Print(fakePanic)
			os.Exit(0)
		case "panicmarked":
			// Only the program with a 7-page region crashes the kernel.
			if strings.Contains(m.Program, "pages=7 ") {
				fmt.Print(fakePanic)
				os.Exit(0)
			}
		case "vanish":
			os.Exit(0)
		case "warn":
			fmt.Print(fakeWarning)
		case "guestlog":
			WriteMsg(conn, &Msg{Type: MsgLog, Text: "guest: could not re-arm once-only warnings before the program (write: illegal seek)"})
		case "execcrash":
			fmt.Print("[   42.000000] Out of memory: Killed process 123 (forkfuzz) total-vm:1000kB\n")
			reply.Crash = &Crash{Status: "signal: killed", Stderr: "fatal error: runtime: out of memory\n"}
		case "execlost":
			fmt.Print("2026/12/03 06:41:56 [ERR] yamux: keepalive failed: i/o deadline reached\n")
			reply.Crash = &Crash{Status: "connection lost (unexpected EOF) while the executor was still running; killed it", Lost: true, State: "State: R (running)\n"}
		}
		if reply.Crash == nil {
			o := map[string]any{"version": 1, "ops": make([]struct{}, len(p.Ops))}
			reply.Observation, _ = json.Marshal(o)
		}
		WriteMsg(conn, reply)
	}
}

func fakeConfig(t *testing.T, mode string) Config {
	dir := t.TempDir()
	img := filepath.Join(dir, "bzImage")
	os.WriteFile(img, []byte("not a kernel"), 0o644)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Kernel: img, Agent: self, Accel: "tcg", Workdir: filepath.Join(dir, "work"), NoSnapshot: true, // the fake serves no QMP
		BootTimeout: 3 * time.Second, HangTimeout: 2 * time.Second, ProgramTimeout: 2 * time.Second,
		Command: func(name string, args ...string) *exec.Cmd {
			sock := ""
			for _, a := range args {
				if _, rest, ok := strings.Cut(a, ",path="); ok {
					sock, _, _ = strings.Cut(rest, ",")
				}
			}
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), "FORKFUZZ_FAKE_QEMU="+mode, "FORKFUZZ_FAKE_SOCK="+sock)
			return cmd
		},
	}
}

const testProg = "forkfuzz v1\nregion r0 anon-private pages=4 thp=default\nstore r0 off=0x0 count=1 stride=0x8\nfork f0\nf0: check\nwait f0\n"

func mustParse(t *testing.T, s string) *prog.Program {
	p, err := prog.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFakeOK(t *testing.T) {
	tg, err := New(fakeConfig(t, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	p := mustParse(t, testProg)
	for i := 0; i < 3; i++ {
		o, err := tg.Run(p, agents.Options{})
		if err != nil || o == nil || len(o.Ops) != len(p.Ops) {
			t.Fatalf("run %d: %v %+v", i, err, o)
		}
	}
	if len(tg.Boots) != 1 || tg.FirstProg <= 0 {
		t.Errorf("boots %v, first program %v", tg.Boots, tg.FirstProg)
	}
}

func TestFakeWarningKeepsObservation(t *testing.T) {
	tg, err := New(fakeConfig(t, "warn"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	p := mustParse(t, testProg)
	for i := 0; i < 2; i++ {
		o, err := tg.Run(p, agents.Options{})
		var ke *KernelReportError
		if !errors.As(err, &ke) || ke.Title != "WARNING in copy_pte_range" || ke.Kind != "warning" || ke.Restarted {
			t.Fatalf("run %d: got %v (%+v), want a WARNING report without restart", i, err, ke)
		}
		if ke.Signature() != "kernel-warning/WARNING-in-copy_pte_range" || !strings.Contains(ke.Explanation(), "mm/memory.c:1047") {
			t.Errorf("signature %q, explanation:\n%s", ke.Signature(), ke.Explanation())
		}
		if o == nil || !strings.Contains(ke.Console, "cut here") || !strings.Contains(ke.Program, "fork f0") {
			t.Errorf("observation %v; console %q; program %q", o, ke.Console, ke.Program)
		}
		// Each program's report is its own: the second run must not see
		// the first run's console again (it prints its own WARNING).
		if strings.Count(ke.Console, "WARNING:") != 1 {
			t.Errorf("run %d: console has %d WARNINGs", i, strings.Count(ke.Console, "WARNING:"))
		}
	}
	if len(tg.Boots) != 1 {
		t.Errorf("a WARNING restarted the VM: boots %v", tg.Boots)
	}
}

func TestFakePanicRestarts(t *testing.T) {
	tg, err := New(fakeConfig(t, "panic"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	p := mustParse(t, testProg)
	for i := 0; i < 2; i++ {
		o, err := tg.Run(p, agents.Options{})
		var ke *KernelReportError
		if !errors.As(err, &ke) || ke.Title != "kernel panic: sysrq triggered crash" || !ke.Restarted || o != nil {
			t.Fatalf("run %d: got %v, want the panic as a kernel report", i, err)
		}
	}
	if len(tg.Boots) != 2 {
		t.Errorf("boots %v, want 2 (restart after the first panic)", tg.Boots)
	}
}

func TestFakeHang(t *testing.T) {
	tg, err := New(fakeConfig(t, "hang"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	start := time.Now()
	_, err = tg.Run(mustParse(t, testProg), agents.Options{})
	var ke *KernelReportError
	if !errors.As(err, &ke) || ke.Kind != "hang" || !strings.HasPrefix(ke.Title, "VM hang: no progress for 2s") {
		t.Fatalf("got %v, want a hang", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("hang detected after %v", d)
	}
}

// A report that killed a task ends the run after CrashGrace even though
// the guest's heartbeat goes on, instead of after the program's timeout.
func TestFakeOopsEndsRunEarly(t *testing.T) {
	cfg := fakeConfig(t, "oopsstuck")
	cfg.ProgramTimeout, cfg.HangTimeout, cfg.CrashGrace = time.Minute, time.Minute, time.Second
	lw := &testutil.SyncBuffer{}
	cfg.Log = lw
	tg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	start := time.Now()
	o, err := tg.Run(mustParse(t, testProg), agents.Options{})
	d := time.Since(start)
	var ke *KernelReportError
	if !errors.As(err, &ke) || ke.Title != "kernel BUG in try_to_migrate_one" || !ke.Restarted || o != nil {
		t.Fatalf("got %v (%+v), want the BUG as a kernel report with a restart", err, ke)
	}
	if d > 30*time.Second {
		t.Errorf("the run ended after %v: the grace (1s) did not cut it short", d)
	}
	if !strings.Contains(lw.String(), "the kernel killed a task") {
		t.Errorf("log does not say why the run ended:\n%s", lw.String())
	}
}

// A run that first restarts the VM the previous program left down says
// so in its phases (RestartPhase); runs on a VM that stayed up do not.
func TestFakeRestartPhase(t *testing.T) {
	tg, err := New(fakeConfig(t, "panicmarked"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	ok, crash := mustParse(t, testProg), mustParse(t, strings.Replace(testProg, "pages=4 ", "pages=7 ", 1))
	o, err := tg.Run(ok, agents.Options{})
	if err != nil || o == nil {
		t.Fatalf("first run: %v", err)
	}
	if _, in := o.Phases[RestartPhase]; in {
		t.Errorf("a run on the first boot has a %s phase: %v", RestartPhase, o.Phases)
	}
	if _, err := tg.Run(crash, agents.Options{}); err == nil {
		t.Fatal("the crashing program did not fail")
	}
	for i, want := range []bool{true, false} {
		o, err := tg.Run(ok, agents.Options{})
		if err != nil || o == nil {
			t.Fatalf("run %d after the crash: %v", i, err)
		}
		if us, in := o.Phases[RestartPhase]; in != want || in && us <= 0 {
			t.Errorf("run %d after the crash: %s phase %d (present %v), want present %v", i, RestartPhase, us, in, want)
		}
	}
	if len(tg.Boots) != 2 {
		t.Errorf("boots %v, want 2", tg.Boots)
	}
}

func TestFakeVanishIsLostConnection(t *testing.T) {
	tg, err := New(fakeConfig(t, "vanish"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	_, err = tg.Run(mustParse(t, testProg), agents.Options{})
	var ke *KernelReportError
	if !errors.As(err, &ke) || ke.Kind != "lost-connection" {
		t.Fatalf("got %v, want lost connection", err)
	}
}

func TestFakeExecutorCrash(t *testing.T) {
	tg, err := New(fakeConfig(t, "execcrash"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	_, err = tg.Run(mustParse(t, testProg), agents.Options{})
	var ce *executor.CrashError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want an executor.CrashError", err)
	}
	// The finding says why: the console's OOM-killer line in the status,
	// the console and the executor's stderr among its files.
	if !strings.Contains(ce.Error(), "OOM killer acted: Out of memory: Killed process 123 (forkfuzz)") {
		t.Fatalf("status lacks the OOM line: %v", ce)
	}
	files := ce.Files()
	if !strings.Contains(files["console.txt"], "Out of memory") || !strings.Contains(files["executor-stderr.txt"], "out of memory") {
		t.Fatalf("finding files lack console or stderr: %q", files)
	}
}

// An executor whose connection broke while it still ran is reported as
// such, with its state and the console (where go-plugin's connection
// says why it gave up).
func TestFakeExecutorLost(t *testing.T) {
	tg, err := New(fakeConfig(t, "execlost"))
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	_, err = tg.Run(mustParse(t, testProg), agents.Options{})
	var ce *executor.CrashError
	if !errors.As(err, &ce) || !ce.Lost || ce.Hang {
		t.Fatalf("got %v, want a lost-connection executor.CrashError", err)
	}
	if !strings.Contains(ce.Files()["console.txt"], "keepalive failed") || !strings.Contains(ce.Files()["executor-state.txt"], "State: R") ||
		!strings.Contains(ce.Explanation(), "still running when its connection broke") {
		t.Fatalf("lost connection not explained: %q %q", ce.Files(), ce.Explanation())
	}
}

// Harness faults are plain errors, never kernel reports.
func TestFakeHarnessFaults(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{"fail", "could not load kernel"},
		{"silent", "no hello from the agent within 3s"},
		{"bootpanic", "console shows: kernel panic: sysrq triggered crash"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			_, err := New(fakeConfig(t, c.mode))
			var ke *KernelReportError
			var be *BootError
			if err == nil || errors.As(err, &ke) || !errors.As(err, &be) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a BootError containing %q", err, c.want)
			}
		})
	}
	cfg := fakeConfig(t, "ok")
	cfg.Command = nil
	cfg.QEMU = "/nonexistent/qemu-system-x86_64"
	_, err := New(cfg)
	var ke *KernelReportError
	if err == nil || errors.As(err, &ke) || !strings.Contains(err.Error(), "start QEMU") {
		t.Fatalf("missing QEMU: got %v", err)
	}
}

// A boot that stalls with an RCU stall report (a TCG guest starved by an
// overloaded host) is retried like a silent one; a boot that panics is
// not (TestFakeBootFailures).
func TestFakeBootStallRetried(t *testing.T) {
	cfg := fakeConfig(t, "ok")
	inner, boots := cfg.Command, 0
	cfg.Command = func(name string, args ...string) *exec.Cmd {
		boots++
		cmd := inner(name, args...)
		if boots == 1 {
			cmd.Env = append(cmd.Env, "FORKFUZZ_FAKE_QEMU=bootstall")
		}
		return cmd
	}
	var log strings.Builder
	cfg.Log = &log
	tg, err := New(cfg)
	if err != nil {
		t.Fatalf("a stalled first boot was not retried: %v", err)
	}
	defer tg.Close()
	if boots != 2 || !strings.Contains(log.String(), "boot attempt 1 failed") {
		t.Errorf("%d boots, log %q: want a failed first attempt and a second boot", boots, log.String())
	}
}

// A boot whose console stays silent for bootSilence is given up and
// retried long before its boot timeout (a TCG guest that stalled without
// a report; the gate's budget cannot wait out five minutes).
func TestFakeSilentBootRetried(t *testing.T) {
	defer func(d time.Duration) { bootSilence = d }(bootSilence)
	bootSilence = time.Second
	cfg := fakeConfig(t, "ok")
	cfg.BootTimeout = time.Minute
	inner, boots := cfg.Command, 0
	cfg.Command = func(name string, args ...string) *exec.Cmd {
		boots++
		cmd := inner(name, args...)
		if boots == 1 {
			cmd.Env = append(cmd.Env, "FORKFUZZ_FAKE_QEMU=silent")
		}
		return cmd
	}
	var log strings.Builder
	cfg.Log = &log
	t0 := time.Now()
	tg, err := New(cfg)
	if err != nil {
		t.Fatalf("a silent first boot was not retried: %v", err)
	}
	defer tg.Close()
	if boots != 2 || !strings.Contains(log.String(), "the guest printed nothing for 1s") {
		t.Errorf("%d boots, log %q: want a first attempt given up for its silence and a second boot", boots, log.String())
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("the silent boot was given up after %v: the boot timeout, not the silence, ended it", d)
	}
}

func TestConsoleSince(t *testing.T) {
	c := newConsole("")
	c.Write([]byte("abc"))
	off := c.Len()
	c.Write([]byte("def"))
	if b, end := c.Since(off); string(b) != "def" || end != 6 {
		t.Errorf("Since: %q %d", b, end)
	}
	big := make([]byte, maxConsole)
	c.Write(big)
	if b, _ := c.Since(0); len(b) != maxConsole {
		t.Errorf("ring keeps %d bytes", len(b))
	}
}

func TestFakePoolConcurrent(t *testing.T) {
	cfg := fakeConfig(t, "ok")
	cfg.VMs = 3
	tg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	p := mustParse(t, testProg)
	errs := make(chan error, 12)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 3; i++ {
				_, err := tg.Run(p, agents.Options{})
				errs <- err
			}
		}()
	}
	for i := 0; i < 12; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(tg.Boots) != 3 {
		t.Errorf("boots %v, want 3 VMs", tg.Boots)
	}
}

// The KVM probe: a kernel that boots under KVM gets KVM; one that hangs
// (as ordinary kernels do under this machine's KVM) falls back to TCG; the
// verdict is cached per image.
func TestAccelProbe(t *testing.T) {
	fakeKVM := filepath.Join(t.TempDir(), "kvm")
	os.WriteFile(fakeKVM, nil, 0o644)
	saved := kvmDevice
	kvmDevice = fakeKVM
	defer func() { kvmDevice = saved }()
	t.Setenv("FORKFUZZ_CACHE", t.TempDir())
	for _, c := range []struct{ mode, want string }{{"ok", "kvm"}, {"silent", "tcg"}} {
		cfg := fakeConfig(t, c.mode)
		cfg.Accel = "auto"
		var argsSeen []string
		inner := cfg.Command
		cfg.Command = func(name string, args ...string) *exec.Cmd {
			argsSeen = append(argsSeen, strings.Join(args, " "))
			return inner(name, args...)
		}
		tg := &Target{cfg: cfg}
		tg.cfg.Log = testLog{t}
		tg.cfg.QEMU, tg.cfg.Memory, tg.cfg.CPUs = "qemu", 64, 1
		tg.cfg.BootTimeout = 2 * time.Second
		os.MkdirAll(cfg.Workdir, 0o755)
		if err := tg.buildInitramfs(); err != nil {
			t.Fatal(err)
		}
		if got := tg.chooseAccel(); got != c.want {
			t.Errorf("%s: accel %s, want %s", c.mode, got, c.want)
		}
		if len(argsSeen) == 0 || !strings.Contains(argsSeen[0], "-accel kvm") {
			t.Errorf("%s: the probe did not boot under KVM: %q", c.mode, argsSeen)
		}
		// Cached: no second probe.
		argsSeen = nil
		if got := tg.chooseAccel(); got != c.want || len(argsSeen) != 0 {
			t.Errorf("%s: second call %s, probes %d", c.mode, got, len(argsSeen))
		}
	}
}

// A report printed while the kernel boots belongs to no program.
func TestFakeBootWarningIsNotAProgramsFinding(t *testing.T) {
	cfg := fakeConfig(t, "bootwarn")
	var log strings.Builder
	cfg.Log = &log
	tg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if _, err := tg.Run(mustParse(t, testProg), agents.Options{}); err != nil {
		t.Fatalf("the first program got the boot's report: %v", err)
	}
	if !strings.Contains(log.String(), "reported while booting: WARNING in copy_pte_range") {
		t.Errorf("log: %s", log.String())
	}
}

// What the agent says about a program it could not fully prepare (a
// MsgLog) reaches the host's log, naming the VM.
func TestFakeGuestLogReachesLog(t *testing.T) {
	cfg := fakeConfig(t, "guestlog")
	var log strings.Builder
	cfg.Log = &log
	tg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	if _, err := tg.Run(mustParse(t, testProg), agents.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "vm 0: guest: could not re-arm once-only warnings before the program (write: illegal seek)") {
		t.Errorf("log: %s", log.String())
	}
}

// The initramfs holds the agent, its configuration, the modules and the
// target file's files.
func TestInitramfsContents(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed: cannot list the archive")
	}
	dir := t.TempDir()
	mod := filepath.Join(dir, "virtio_console.ko")
	os.WriteFile(mod, []byte("module"), 0o644)
	tool := filepath.Join(dir, "busybox")
	os.WriteFile(tool, []byte("tool"), 0o755)
	tf, err := ParseTargetFile(filepath.Join(dir, "t.target"), []byte("file = busybox /bin/busybox\nsetup = write /proc/sys/vm/x 1\nfork-mode = prctl 65 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fakeConfig(t, "ok")
	cfg.Modules = []string{mod}
	cfg.TargetFile = tf
	tg := &Target{cfg: cfg}
	os.MkdirAll(cfg.Workdir, 0o755)
	if err := tg.buildInitramfs(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(tg.initrd)
	defer f.Close()
	list := exec.Command(cpio, "-it", "--quiet")
	list.Stdin = f
	out, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"forkfuzz", "etc/forkfuzz/agent.json", "lib/modules/00-virtio_console.ko", "bin/busybox", "proc", "tmp"} {
		if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
			t.Errorf("initramfs lacks %s:\n%s", want, out)
		}
	}
}

func TestQuietConsole(t *testing.T) {
	for _, c := range []struct {
		cmdline string
		quiet   bool
	}{
		{"", false},
		{"async_fork.seq_fix=1 forkfuzz.swap=1", false},
		{"quiet", true},
		{"loglevel=3", true},
		{"console=ttyS1", true},
		{"console=ttyS0", false},
		{"noquiet", false},
	} {
		if got := quietConsole(c.cmdline); got != c.quiet {
			t.Errorf("quietConsole(%q) = %v, want %v", c.cmdline, got, c.quiet)
		}
	}
}
