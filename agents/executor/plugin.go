package executor

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/rpc"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
)

// Handshake is shared by forkfuzz and its executor processes.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "FORKFUZZ_EXECUTOR",
	MagicCookieValue: "b6d7f1f0-forkfuzz-executor-v1",
}

const pluginName = "executor"

// RunArgs is the RPC request: a program in its text format.
type RunArgs struct {
	Program []byte
	Options Options
	// SelfKill is test-only: the executor kills itself with SIGKILL after
	// receiving the program, as the OOM killer would, after a line on
	// its standard error.
	SelfKill bool
	// LimitOOM is test-only: the executor writes that a memory limit is
	// armed (memcg_quiet.go), then makes the Go runtime die of a real
	// out-of-memory (under RLIMIT_AS), as it would under the limit.
	LimitOOM bool
	// SelfStop is test-only: the executor stops itself (SIGSTOP), as a
	// process that stops answering.
	SelfStop bool
	// ObsFile, when set, is a file the executor writes the observation
	// to (at offset 0) instead of sending it over the connection: an
	// observation of megabytes went through go-plugin's connection at
	// tens of MB/s. The reply's ObsLen is then its length.
	ObsFile string
}

// RunReply carries the observation as JSON, or a harness error.
type RunReply struct {
	Observation []byte
	Err         string
	// Phases are the run's phases in the executor (obs.Observation.Phases,
	// also in Observation) and the time to encode it ("marshal").
	Phases map[string]int64
	// PTEKB is the executor's page tables (VmPTE, KiB) after the run, -1
	// unknown: the Remote replaces an executor whose page tables reached
	// the next run's Options.RecyclePTEKB before that run.
	PTEKB int64
	// ObsLen is the length of the observation in RunArgs.ObsFile, when
	// it went there (Observation is then nil).
	ObsLen int
}

// oomSink keeps RunArgs.LimitOOM's allocation from being optimized away.
var oomSink []byte

type rpcServer struct {
	x       *Executor
	obsFile *os.File // RunArgs.ObsFile, open
}

// sendFile writes the observation b to the file at path (opened once)
// and reports whether it did; the reply carries it otherwise.
func (s *rpcServer) sendFile(path string, b []byte) bool {
	if s.obsFile == nil || s.obsFile.Name() != path {
		if s.obsFile != nil {
			s.obsFile.Close()
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			s.obsFile = nil
			return false
		}
		s.obsFile = f
	}
	_, err := s.obsFile.WriteAt(b, 0)
	return err == nil
}

func (s *rpcServer) Run(args RunArgs, reply *RunReply) error {
	if args.SelfKill {
		// File descriptor 2, as the runtime writes a fatal error (go-plugin
		// replaced os.Stderr with a pipe to the client's SyncStderr).
		unix.Write(2, []byte("executor: killing itself (test)\n"))
		unix.Kill(os.Getpid(), unix.SIGKILL)
	}
	if args.LimitOOM {
		stderrMark(limitArmedMarker + " (test)")
		unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: 1 << 20, Max: unix.RLIM_INFINITY})
		oomSink = make([]byte, 1<<30)
	}
	if args.SelfStop {
		unix.Kill(os.Getpid(), unix.SIGSTOP)
	}
	p, err := prog.Parse(args.Program)
	if err != nil {
		reply.Err = err.Error()
		return nil
	}
	o, err := s.x.Run(p, args.Options)
	if err != nil {
		reply.Err = err.Error()
		return nil
	}
	t0 := time.Now()
	o.OmitDerivedPages() // the reader derives them from the words
	reply.Observation, err = json.Marshal(o)
	if err != nil {
		reply.Err = err.Error()
	}
	if err == nil && args.ObsFile != "" && s.sendFile(args.ObsFile, reply.Observation) {
		reply.ObsLen, reply.Observation = len(reply.Observation), nil
	}
	reply.Phases = map[string]int64{"marshal": time.Since(t0).Microseconds()}
	for k, us := range o.Phases {
		reply.Phases[k] += us
	}
	reply.PTEKB = -1
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		reply.PTEKB = statusKB(st, "VmPTE:")
	}
	return nil
}

type rpcClient struct{ c *rpc.Client }

func (c *rpcClient) run(args RunArgs) (*RunReply, error) {
	var reply RunReply
	err := c.c.Call("Plugin.Run", args, &reply)
	return &reply, err
}

// execPlugin adapts the executor to go-plugin's net/rpc protocol.
type execPlugin struct{ x *Executor }

func (p *execPlugin) Server(*plugin.MuxBroker) (interface{}, error) { return &rpcServer{x: p.x}, nil }
func (p *execPlugin) Client(_ *plugin.MuxBroker, c *rpc.Client) (interface{}, error) {
	return &rpcClient{c}, nil
}

// Serve runs this process as an executor plugin; it never returns. It
// re-executes the process first if GODEBUG lacks what the executor needs.
func Serve() {
	if err := ReexecWithGODEBUG(); err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		os.Exit(2)
	}
	// go-plugin's net/rpc server logs through the standard logger at
	// shutdown; nothing there is for the user.
	log.SetOutput(io.Discard)
	// Die with the host: an orphaned executor holds forked children.
	unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	// One P per writer thread, one for the program's thread and spare
	// ones for go-plugin's connection: with only as many Ps as CPUs (2
	// in a VM), spinning writer threads and the garbage collector held
	// them all and the connection's goroutines waited for a P, past the
	// peer's 10 s keepalive under TCG. The kernel shares the CPUs.
	if n := prog.MaxThreads + 3; runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
	x, err := New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         map[string]plugin.Plugin{pluginName: &execPlugin{x}},
		Logger:          hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr}),
	})
	os.Exit(0)
}

// CrashError reports that the executor process died or hung while running a
// program, or that its connection broke. It is an event of the run (the
// program may have triggered it), not a harness failure; the Remote
// restarts the executor on the next Run.
type CrashError struct {
	Hang   bool   // no answer within the timeout; the executor was killed
	Status string // how the process ended, e.g. "signal: killed"
	// Lost: the connection to the executor broke while the process was
	// still running (it was killed after State was read): the program did
	// not make it die; something made it stop answering.
	Lost bool
	// Stderr is what the executor wrote on its standard error during the
	// run (last 128 KiB); State the live process's threads and memory
	// before it was killed (hangs and lost connections); Console the VM
	// console since the program started (QEMU targets).
	Stderr, State, Console string
}

func (e *CrashError) Error() string {
	if e.Hang {
		return "executor hung: " + e.Status
	}
	return "executor died: " + e.Status
}

// Oracle is "executor-hang" or "executor-crash" (CrashError is an
// agents.Event: the program made the executor die or hang).
func (e *CrashError) Oracle() string {
	if e.Hang {
		return string(oracle.ExecutorHang)
	}
	return string(oracle.ExecutorCrash)
}

// Signature is the oracle: one crash or hang is one bug until its
// program says otherwise.
func (e *CrashError) Signature() string { return e.Oracle() }

// Explanation is Error, then the executor's standard error and state.
func (e *CrashError) Explanation() string {
	var b strings.Builder
	b.WriteString(e.Error())
	if busy := busyThreads(e.State); e.Hang && busy != "" {
		// A thread running or in uninterruptible sleep is where a hang
		// is: the goroutine dump's tail below shows idle runtime threads.
		fmt.Fprintf(&b, "\nthreads running or in uninterruptible sleep: %s", busy)
	}
	if e.Lost {
		b.WriteString("\nthe executor process was still running when its connection broke (state below; it was then killed)")
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		fmt.Fprintf(&b, "\n--- executor stderr during the run ---\n%s", crashLines(s, 40))
	} else {
		b.WriteString("\nexecutor stderr during the run: empty")
	}
	if s := strings.TrimSpace(e.State); s != "" {
		fmt.Fprintf(&b, "\n--- executor state before it was killed ---\n%s", lastLines(s, 60))
	}
	return b.String()
}

// Files are the executor's standard error and state and the VM console,
// for the finding directory.
func (e *CrashError) Files() map[string]string {
	files := map[string]string{"executor-stderr.txt": e.Stderr}
	if e.State != "" {
		files["executor-state.txt"] = e.State
	}
	if e.Console != "" {
		files["console.txt"] = e.Console
	}
	return files
}

// busyThreads lists the "thread N: state R|D, wchan W" lines of an
// executor state (crashinfo.go), separated by "; ".
func busyThreads(state string) string {
	var busy []string
	for _, l := range strings.Split(state, "\n") {
		if strings.HasPrefix(l, "thread ") && (strings.Contains(l, ": state R,") || strings.Contains(l, ": state D,")) {
			busy = append(busy, strings.TrimSpace(l))
		}
	}
	return strings.Join(busy, "; ")
}

// crashLines is lastLines, except where the Go runtime reported a panic
// or fatal error: then its first n lines from there (the message and the
// goroutine that died; a GOTRACEBACK=crash dump of every goroutine after
// it is hundreds of lines, and its tail hid the message).
func crashLines(s string, n int) string {
	l := strings.Split(s, "\n")
	for i, line := range l {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			out := l[i:]
			if len(out) > n {
				out = append(out[:n:n], fmt.Sprintf("[%d lines after]", len(l)-i-n))
			}
			if i > 0 {
				out = append([]string{fmt.Sprintf("[%d lines before]", i)}, out...)
			}
			return strings.Join(out, "\n")
		}
	}
	return lastLines(s, n)
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = append([]string{fmt.Sprintf("[%d lines before]", len(l)-n)}, l[len(l)-n:]...)
	}
	return strings.Join(l, "\n")
}

// Remote runs programs in a separate executor process started through
// go-plugin, so a crash, hang or OOM kill of the executor never takes the
// caller down.
type Remote struct {
	// Command returns the command that starts an executor process (one
	// that calls Serve).
	Command func() *exec.Cmd
	// Timeout bounds one program (default 60s).
	Timeout time.Duration
	// Stderr receives the executor's standard error (default discard).
	Stderr io.Writer
	// DumpGoroutines: before a hung executor, or one whose connection
	// broke while it still ran, is killed, it gets SIGQUIT so that the Go
	// runtime writes every goroutine's stack on its stderr.
	DumpGoroutines bool

	mu     sync.Mutex
	stderr *tailBuffer
	client *plugin.Client
	cmd    *exec.Cmd
	rc     *rpcClient
	// obsFile is where executors write their observations: a
	// temporary file removed as soon as it is made, so that nothing is
	// left behind however this process ends, which executors open as
	// obsPath (/proc/PID/fd/N, RunArgs.ObsFile). Nil until the first
	// run, or when it cannot be made (observations then come over the
	// connection).
	obsFile  *os.File
	obsPath  string
	obsTried bool
	Restarts int
	// Recycles counts executors replaced because their page tables grew
	// (Options.RecyclePTEKB; not in Restarts).
	Recycles int
	lastPTE  int64 // the executor's page tables after its last run (KiB)
}

func (r *Remote) start() error {
	cmd := r.Command()
	cmd.Env = EnvWithGODEBUG(append(cmd.Env, os.Environ()...))
	r.stderr = &tailBuffer{max: 128 << 10, next: r.Stderr}
	stderr := r.stderr
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          map[string]plugin.Plugin{pluginName: &execPlugin{}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolNetRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Off, Output: io.Discard}),
		Stderr:           stderr,
		// What the executor writes to os.Stderr once it serves (go-plugin
		// redirects it through the connection): yamux's errors, ours.
		SyncStderr:   stderr,
		StartTimeout: 30 * time.Second,
	})
	proto, err := client.Client()
	if err != nil {
		client.Kill()
		return fmt.Errorf("start executor: %w", err)
	}
	raw, err := proto.Dispense(pluginName)
	if err != nil {
		client.Kill()
		return fmt.Errorf("start executor: %w", err)
	}
	r.client, r.cmd, r.rc = client, cmd, raw.(*rpcClient)
	return nil
}

// Run executes p in the executor process. A *CrashError means the executor
// died or hung running it; other errors are harness errors.
func (r *Remote) Run(p *prog.Program, opt Options) (*obs.Observation, error) {
	return r.run(RunArgs{Program: p.Format(), Options: opt}, len(p.Ops))
}

// RunRaw is Run that returns the observation as the executor encoded it
// (JSON), undecoded, and the run's phases (obs.Observation.Phases, with
// the executor's start and the RPC's share): the VM agent forwards it to
// the host as it is, rather than decoding and encoding again megabytes
// of views in a slow guest.
func (r *Remote) RunRaw(p *prog.Program, opt Options) ([]byte, map[string]int64, error) {
	return r.runRaw(RunArgs{Program: p.Format(), Options: opt})
}

func (r *Remote) run(args RunArgs, nops int) (*obs.Observation, error) {
	raw, phases, err := r.runRaw(args)
	if err != nil {
		return nil, err
	}
	var o obs.Observation
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("executor reply: %w", err)
	}
	if len(o.Ops) != nops {
		return nil, fmt.Errorf("executor reply: %d op results for %d ops", len(o.Ops), nops)
	}
	o.Phases = phases
	return &o, nil
}

func (r *Remote) runRaw(args RunArgs) ([]byte, map[string]int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var started time.Duration
	t0 := time.Now()
	if b := args.Options.RecyclePTEKB; b > 0 && r.client != nil && !r.client.Exited() && r.lastPTE >= b {
		r.kill()
		r.client = nil
		r.Recycles++
	}
	if r.client == nil || r.client.Exited() {
		if r.client != nil {
			r.client.Kill()
			r.Restarts++
		}
		r.lastPTE = 0
		if err := r.start(); err != nil {
			r.client = nil
			return nil, nil, err
		}
		started = time.Since(t0)
	}
	timeout := r.Timeout
	if ms := args.Options.TimeoutMs; ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	type result struct {
		reply *RunReply
		err   error
	}
	// Drop what the executor wrote before this run, before the run
	// starts: taken after, it could also drop the run's own last words
	// (an executor that writes and dies at once, on a loaded host).
	if r.stderr != nil {
		r.stderr.take()
	}
	args.ObsFile = r.obsTarget()
	done := make(chan result, 1)
	sent := time.Now()
	go func() {
		reply, err := r.rc.run(args)
		done <- result{reply, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(timeout):
		state := r.liveState()
		r.kill()
		return nil, nil, &CrashError{Hang: true, Status: fmt.Sprintf("no answer within %v", timeout), State: state, Stderr: r.stderr.take()}
	}
	if res.err != nil {
		return nil, nil, r.died(res.err)
	}
	if res.reply.Err != "" {
		return nil, nil, FromText("", res.reply.Err)
	}
	if err := r.readObs(res.reply); err != nil {
		return nil, nil, err
	}
	r.lastPTE = res.reply.PTEKB
	phases := res.reply.Phases
	if phases == nil {
		phases = map[string]int64{}
	}
	var inside int64
	for _, us := range phases {
		inside += us
	}
	phases["executor-rpc"] += max(time.Since(sent).Microseconds()-inside, 0)
	if started > 0 {
		phases["executor-start"] += started.Microseconds()
	}
	return res.reply.Observation, phases, nil
}

// died says how the executor ended after its connection broke with err:
// a CrashError, or a LimitCrashError when the Go runtime ran out of
// memory under the executor's own memory limit (limitcrash.go).
func (r *Remote) died(err error) error {
	// The connection broke: the executor died, or stopped answering
	// (go-plugin's connection gives up on a peer that does not
	// answer its keepalive within 10 s). Wait for go-plugin to reap
	// it so its exit status is known.
	deadline := time.Now().Add(5 * time.Second)
	for !r.client.Exited() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ce := &CrashError{Status: err.Error()}
	switch {
	case r.client.Exited() && r.cmd.ProcessState != nil:
		// go-plugin reports Exited only after it read the
		// executor's stderr to its end: nothing more will come.
		ce.Status = r.cmd.ProcessState.String()
	case !r.client.Exited():
		ce.Lost = true
		ce.State = r.liveState()
		ce.Status = fmt.Sprintf("connection lost (%v) while the executor was still running; killed it", err)
	}
	r.kill()
	ce.Stderr = r.stderr.take()
	if fatal := armedRuntimeOOM(ce.Stderr); fatal != "" && !ce.Lost {
		return &LimitCrashError{Fatal: fatal, Status: ce.Status, Stderr: ce.Stderr}
	}
	return ce
}

// obsTarget returns the file the executor is to write the observation to
// (RunArgs.ObsFile), made on the first call; "" when it cannot be made.
func (r *Remote) obsTarget() string {
	if !r.obsTried {
		r.obsTried = true
		if f, err := os.CreateTemp("", "forkfuzz-obs-*"); err == nil {
			os.Remove(f.Name())
			r.obsFile, r.obsPath = f, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd())
		}
	}
	return r.obsPath
}

// readObs reads the observation the executor wrote to the file, when it
// did (RunReply.ObsLen), into reply.Observation.
func (r *Remote) readObs(reply *RunReply) error {
	n := reply.ObsLen
	if n <= 0 {
		return nil
	}
	reply.Observation = make([]byte, n)
	if _, err := r.obsFile.ReadAt(reply.Observation, 0); err != nil {
		return fmt.Errorf("executor reply: reading the observation (%d bytes) from %s: %w", n, r.obsPath, err)
	}
	return nil
}

// liveState describes the executor process if it is still running: its
// threads and memory from /proc, then (if DumpGoroutines) the Go
// runtime's dump of every goroutine, which SIGQUIT makes it write on its
// standard error as it exits (with GOTRACEBACK=crash in its environment
// it includes the goroutines running on other threads).
func (r *Remote) liveState() string {
	if r.cmd == nil || r.cmd.Process == nil {
		return ""
	}
	s := fmt.Sprintf("executor pid %d\n", r.cmd.Process.Pid) + processState(r.cmd.Process.Pid)
	if r.DumpGoroutines {
		r.cmd.Process.Signal(unix.SIGQUIT)
		r.cmd.Process.Signal(unix.SIGCONT) // a stopped process handles it now
		deadline := time.Now().Add(5 * time.Second)
		for !r.client.Exited() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		s += "(sent SIGQUIT for a goroutine dump: see the executor's stderr)\n"
	}
	return s
}

// kill kills the executor process at once, then lets go-plugin clean up
// (go-plugin's Kill first asks the process to quit over the connection
// and waits for an answer that a hung or stopped process never gives).
func (r *Remote) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
	}
	r.client.Kill()
}

// Close stops the executor process.
func (r *Remote) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		r.client.Kill()
		r.client = nil
	}
	if r.obsFile != nil {
		r.obsFile.Close()
		r.obsFile, r.obsPath, r.obsTried = nil, "", false
	}
}
