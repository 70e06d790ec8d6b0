package vm

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
	"github.com/forkfuzz/forkfuzz/kernel"
	"github.com/forkfuzz/forkfuzz/kernel/report"
)

// Config configures a pool of QEMU VMs.
type Config struct {
	// Kernel is the bzImage/vmlinuz to boot.
	Kernel string
	// Modules are host .ko files the guest loads at boot, dependencies
	// first (a distro kernel's virtio_console and its dependencies).
	Modules []string
	// Agent is a statically linked forkfuzz binary for the guest (default:
	// this executable; a dynamically linked one is shipped with its
	// libraries, found with ldd).
	Agent string
	// VMs is the pool size (default 1).
	VMs int
	// Memory (MiB, default 1024) and CPUs (default 2) per VM.
	Memory, CPUs int
	// NUMANodes per VM (default 2; 1: no NUMA topology). Node 0 has
	// Memory and the CPUs, each further node 256 MiB more, and automatic
	// NUMA balancing is off: pages move only when a program's migrate or
	// migrateloop moves them (move_pages needs a second node with memory
	// to move a page to).
	NUMANodes int
	// Accel: "auto" (default: KVM if a probe boot under KVM works, else
	// TCG), "kvm" or "tcg".
	Accel string
	// Cmdline is appended to the kernel command line.
	Cmdline string
	// Workdir holds each VM's console log (vm-N/console.log) and the
	// initramfs (default: a temporary directory, removed on Close).
	Workdir string
	// TargetFile holds guest set-up and fork-mode steps (optional).
	TargetFile *TargetFile
	// BootTimeout bounds a boot up to the agent's hello (default 5m);
	// ProgramTimeout bounds one program in the guest (default 60s);
	// HangTimeout is how long the guest may send nothing, not even a
	// heartbeat, before the VM counts as hung (default 60s).
	BootTimeout, ProgramTimeout, HangTimeout time.Duration
	// CrashGrace is how long a program may still take to answer after
	// the console showed a report that killed a task (an Oops) before
	// the run ends with that report and the VM restarts (default 5s: a
	// program that still answers does so within a few seconds of the
	// report, docs/qemu.md).
	CrashGrace time.Duration
	// QEMU is the emulator binary (default qemu-system-x86_64).
	QEMU string
	// NoSnapshot boots every VM cold. By default the state of a VM
	// right after the agent's hello is saved once (per QEMU, arguments,
	// kernel and initramfs) in SnapshotDir and loaded instead of a boot
	// (snapshot.go).
	NoSnapshot bool
	// SnapshotDir holds the saved states (default: the user's cache
	// directory's forkfuzz/vmstate).
	SnapshotDir string
	// Log receives boot and restart messages (default discard).
	Log io.Writer
	// Command creates processes (default exec.Command); tests substitute
	// a fake QEMU.
	Command func(name string, args ...string) *exec.Cmd
}

// KernelReportError is a kernel finding: the kernel under test printed a
// report (BUG, WARNING, Oops, KASAN, panic, Bad rss-counter, page table
// check, hung task, RCU stall, soft lockup) on the console while a program
// ran, or the VM hung (no progress within the hang timeout), or the guest
// went down without a word. It is an event of the run, judged as a
// finding, like *executor.CrashError; any other error from Target.Run is a
// harness fault.
//
// Target.Run may return an observation together with a
// *KernelReportError when the program completed but the kernel complained
// (a WARNING, for example).
type KernelReportError struct {
	// Title is the deduplication key: "WARNING in copy_pte_range",
	// "kernel panic: sysrq triggered crash", "VM hang: no progress for 1m0s",
	// "lost connection to VM".
	Title string `json:"title"`
	// Kind: a report.Kind ("bug", "warning", "panic", ...), "hang" or
	// "lost-connection".
	Kind string `json:"kind"`
	// Report is the report's text from the console (may be empty for
	// hangs and lost connections); Console is the console output since the
	// program started (last 256 KiB).
	Report  string `json:"report,omitempty"`
	Console string `json:"console"`
	// VM is the pool index of the VM; Kernel the image and its uname.
	VM     int    `json:"vm"`
	Kernel string `json:"kernel"`
	// Program is the text of the program that was running.
	Program string `json:"program"`
	// Steps are the target file's guest set-up steps (with outcome) and
	// fork-mode steps in effect.
	Steps []string `json:"steps,omitempty"`
	// Restarted: the VM was restarted after the event.
	Restarted bool `json:"restarted"`
}

func (e *KernelReportError) Error() string { return "kernel: " + e.Title }

// Files are the console and the report, for the finding directory
// (KernelReportError is an agents.Event).
func (e *KernelReportError) Files() map[string]string {
	files := map[string]string{"console.txt": e.Console}
	if e.Report != "" {
		files["kernel-report.txt"] = e.Report
	}
	return files
}

// Oracle names the kernel health oracle that fired: "kernel-" + Kind
// (kernel-warning, kernel-bug, kernel-panic, kernel-hang,
// kernel-lost-connection, ...).
func (e *KernelReportError) Oracle() string { return string(oracle.ForKernelReport(e.Kind)) }

// Signature is a deduplication key safe in a file name:
// "kernel-warning/WARNING-in-copy_pte_range".
func (e *KernelReportError) Signature() string {
	b := []byte(e.Title)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	return e.Oracle() + "/" + strings.Trim(string(b), "-")
}

// Explanation is the human-readable body of a finding: the title, the VM
// and kernel, the target file steps in effect, the report and the console
// excerpt.
func (e *KernelReportError) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nkernel report (%s) in VM %d, kernel %s", e.Title, e.Kind, e.VM, e.Kernel)
	if e.Restarted {
		b.WriteString("; the VM was restarted")
	}
	b.WriteString("\n")
	for _, s := range e.Steps {
		fmt.Fprintf(&b, "target file: %s\n", s)
	}
	if e.Report != "" {
		fmt.Fprintf(&b, "\n--- report ---\n%s\n", strings.TrimRight(e.Report, "\n"))
	}
	fmt.Fprintf(&b, "\n--- console since the program started ---\n%s\n", strings.TrimRight(lastBytes([]byte(e.Console), 32<<10), "\n"))
	return b.String()
}

// Target runs programs in a pool of QEMU VMs booted with the kernel under
// test. It implements agents.Target; Run may be called concurrently (one
// program per VM at a time).
type Target struct {
	cfg     Config
	initrd  string
	tmpDir  string
	accel   string
	snap    *snapshots // saved VM states (snapshot.go)
	idle    chan *instance
	all     []*instance
	forkMod []string

	mu     sync.Mutex
	closed bool
	// pace is the guest's measured speed, for program timeouts.
	pace pace
	// Stats
	Boots     []time.Duration // every boot's time to the agent's hello (or a restore's to its first message)
	Restores  int             // how many of Boots loaded a saved state (snapshot.go)
	FirstProg time.Duration   // boot start of VM 0 to its first program's result
}

// New builds the initramfs and boots the pool. It fails (a harness error)
// if the first VM cannot boot.
func New(cfg Config) (*Target, error) {
	cfg.fillDefaults()
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Command == nil {
		cfg.Command = exec.Command
	}
	if cfg.Kernel == "" {
		return nil, errors.New("vm: no kernel image")
	}
	if _, err := os.Stat(cfg.Kernel); err != nil {
		return nil, fmt.Errorf("vm: kernel image: %w", err)
	}
	t := &Target{cfg: cfg}
	if cfg.Workdir == "" {
		d, err := os.MkdirTemp("", "forkfuzz-vm-")
		if err != nil {
			return nil, fmt.Errorf("vm: %w", err)
		}
		t.tmpDir = d
		t.cfg.Workdir = d
	}
	if err := os.MkdirAll(t.cfg.Workdir, 0o755); err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	if cfg.TargetFile != nil {
		for _, s := range cfg.TargetFile.ForkMode {
			t.forkMod = append(t.forkMod, "fork-mode: "+s.String())
		}
	}
	if err := t.buildInitramfs(); err != nil {
		t.cleanup()
		return nil, err
	}
	t.accel = t.chooseAccel()
	t.initSnapshots()
	t.idle = make(chan *instance, cfg.VMs)
	for i := 0; i < cfg.VMs; i++ {
		t.all = append(t.all, &instance{idx: i, t: t})
	}
	// Boot VM 0 first: a kernel that cannot boot fails here, once.
	if err := t.all[0].boot(); err != nil {
		t.cleanup()
		return nil, err
	}
	var wg sync.WaitGroup
	for _, in := range t.all[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := in.boot(); err != nil {
				fmt.Fprintf(cfg.Log, "vm %d: %v (will retry on first use)\n", in.idx, err)
			}
		}()
	}
	wg.Wait()
	for _, in := range t.all {
		t.idle <- in
	}
	return t, nil
}

// KernelRelease is the guest kernel's uname (release and version) as the
// agent reported it at the last boot.
func (t *Target) KernelRelease() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.all {
		if in.uname != "" {
			return in.uname
		}
	}
	return ""
}

// KernelImage is the path of the kernel image the VMs boot.
func (t *Target) KernelImage() string { return t.cfg.Kernel }

// HugetlbPages is how many 2 MiB hugetlb pages each guest reserves at
// boot (agents.HugetlbHost).
func (t *Target) HugetlbPages() int { return guestHugePages(t.cfg.Memory) }

// ForkImpls are the fork-implementation profiles whose knob the guest
// kernel has, as the agent reported them at the last boot.
func (t *Target) ForkImpls() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.all {
		if in.uname != "" {
			return in.impls
		}
	}
	return nil
}

// FileSystems are the file systems of the file region kinds the guest
// has (agents.FileSystemHost), as the agent reported them at the last
// boot; nil before the first.
func (t *Target) FileSystems() []prog.FS {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range t.all {
		if in.uname != "" {
			return parseFileSystems(in.fss)
		}
	}
	return nil
}

// parseFileSystems maps names to prog's file systems, dropping unknown ones.
func parseFileSystems(names []string) []prog.FS {
	var fs []prog.FS
	for _, n := range names {
		for _, f := range prog.FileSystems() {
			if f.String() == n {
				fs = append(fs, f)
			}
		}
	}
	return fs
}

// Accel is the accelerator in use ("kvm" or "tcg").
func (t *Target) Accel() string { return t.accel }

func (t *Target) Name() string { return "qemu" }

// Parallel is how many programs Run can usefully run at once: one per VM.
func (t *Target) Parallel() int { return t.cfg.VMs }

// Run runs p on an idle VM. See KernelReportError for kernel findings; an
// *executor.CrashError means the guest's executor died or hung; other
// errors are harness faults (QEMU would not start or was killed from
// outside, the host is out of disk, ...), never findings.
func (t *Target) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	return t.run(p, opt, testHooks{})
}

// testHooks are test-only actions the agent takes before a program.
type testHooks struct {
	holdMs      int
	path, value string
	read        string  // a guest file to read before the program
	readOut     *string // receives its content
}

func (t *Target) run(p *prog.Program, opt agents.Options, tt testHooks) (*obs.Observation, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errors.New("vm: target closed")
	}
	in := <-t.idle
	defer func() { t.idle <- in }()
	var restart time.Duration
	if !in.running() {
		t0 := time.Now()
		if err := in.boot(); err != nil {
			return nil, err
		}
		restart = time.Since(t0)
	}
	o, err := in.run(p, opt, tt)
	if o != nil && restart > 0 {
		// The VM went down with the previous program (a kernel report,
		// a hang): its restart is this run's, said apart from the
		// guest's phases (RestartPhase).
		if o.Phases == nil {
			o.Phases = map[string]int64{}
		}
		o.Phases[RestartPhase] += restart.Microseconds()
	}
	return o, err
}

// RestartPhase is the phase (obs.Observation.Phases, measured on the
// host) of a run that first had to boot its VM again, or load its saved
// state, because the previous program on it left it down.
const RestartPhase = "vm-restart"

// Close stops every VM.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	for _, in := range t.all {
		in.stop()
	}
	t.cleanup()
	return nil
}

func (t *Target) cleanup() {
	if t.tmpDir != "" {
		os.RemoveAll(t.tmpDir)
	}
}

// buildInitramfs writes the guest's initramfs: the agent binary (and its
// libraries if it is not static), the modules, the agent's configuration,
// the target file's files and the ext4 image (ext4img.go).
func (t *Target) buildInitramfs() error {
	agent := t.cfg.Agent
	if agent == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("vm: find the forkfuzz binary for the guest: %w", err)
		}
		agent = exe
	}
	f := kernel.NewInitramfs()
	for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/root", "/lib/modules"} {
		f.Dir(d)
	}
	f.HostFile(AgentBinary, 0o755, agent)
	libs, err := sharedLibs(agent)
	if err != nil {
		return err
	}
	for _, l := range libs {
		f.HostFile(l, 0o755, l)
	}
	cfg := AgentConfig{Port: portName, ProgramTimeoutMs: int(t.cfg.ProgramTimeout / time.Millisecond)}
	for i, m := range t.cfg.Modules {
		g := fmt.Sprintf("/lib/modules/%02d-%s", i, filepath.Base(m))
		f.HostFile(g, 0o644, m)
		cfg.Modules = append(cfg.Modules, g)
	}
	if tf := t.cfg.TargetFile; tf != nil {
		cfg.Setup, cfg.ForkMode = tf.Setup, tf.ForkMode
		for _, file := range tf.Files {
			if _, err := os.Stat(file.Host); err != nil {
				return fmt.Errorf("%s: file: %w", tf.Path, err)
			}
			f.HostFile(file.Guest, 0o755, file.Host)
		}
	}
	if img, err := BuildExt4Image(t.cfg.Workdir); err != nil {
		fmt.Fprintf(t.cfg.Log, "vm: no ext4 image for the guest (ext4 regions will be refused): %v\n", err)
	} else {
		f.File(guestExt4Image, 0o600, img)
	}
	b, _ := json.MarshalIndent(cfg, "", " ")
	f.File(AgentConfigPath, 0o644, b)
	t.initrd = filepath.Join(t.cfg.Workdir, "initramfs.cpio")
	if err := f.WriteFile(t.initrd); err != nil {
		return fmt.Errorf("vm: write initramfs: %w", err)
	}
	return nil
}

// sharedLibs returns the shared libraries (and loader) a dynamically
// linked binary needs, or nothing for a static one.
func sharedLibs(bin string) ([]string, error) {
	ef, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("vm: guest agent %s: %w", bin, err)
	}
	defer ef.Close()
	dynamic := false
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			dynamic = true
		}
	}
	if !dynamic {
		return nil, nil
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("vm: the guest agent %s is dynamically linked and ldd failed (%v): build forkfuzz with CGO_ENABLED=0", bin, err)
	}
	var libs []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
			}
		}
	}
	return libs, nil
}

// chooseAccel decides between KVM and TCG. "auto" uses KVM only if
// /dev/kvm opens and a probe boot of this kernel under KVM reaches the
// agent (some hosts' KVM hangs ordinary kernels); the verdict is cached
// per kernel image in kernel.CacheDir().
func (t *Target) chooseAccel() string {
	switch t.cfg.Accel {
	case "kvm", "tcg":
		return t.cfg.Accel
	}
	f, err := os.OpenFile(kvmDevice, os.O_RDWR, 0)
	if err != nil {
		return "tcg"
	}
	f.Close()
	key := probeKey(t.cfg.Kernel)
	cache := filepath.Join(kernel.CacheDir(), "kvm-probe", key)
	if b, err := os.ReadFile(cache); err == nil {
		return strings.TrimSpace(string(b))
	}
	probe := &instance{idx: -1, t: t}
	t.accel = "kvm"
	verdict := "tcg"
	saved := t.cfg.BootTimeout
	t.cfg.BootTimeout = min(saved, 60*time.Second)
	if err := probe.boot1(); err == nil {
		verdict = "kvm"
	} else {
		why := err.Error()
		var be *BootError
		if errors.As(err, &be) {
			why = be.Reason
		}
		fmt.Fprintf(t.cfg.Log, "vm: a probe boot under KVM failed (%s); using TCG\n", why)
	}
	probe.stop()
	t.cfg.BootTimeout = saved
	os.MkdirAll(filepath.Dir(cache), 0o755)
	os.WriteFile(cache, []byte(verdict+"\n"), 0o644)
	return verdict
}

// kvmDevice is KVM's device (a variable for tests).
var kvmDevice = "/dev/kvm"

func probeKey(image string) string {
	h := sha256.New()
	if st, err := os.Stat(image); err == nil {
		fmt.Fprintf(h, "%s %d %d", image, st.Size(), st.ModTime().UnixNano())
	}
	if q, err := exec.LookPath("qemu-system-x86_64"); err == nil {
		if st, err := os.Stat(q); err == nil {
			fmt.Fprintf(h, " %d", st.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// scanReports returns the kernel report in console output b that makes
// the run's finding: the worst (report.Worst), so that a warning first
// does not hide a BUG after it.
func scanReports(b []byte) *report.Report {
	if !report.Contains(b) {
		return nil
	}
	return report.Worst(b)
}

func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
