package vm

import (
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// Integration tests: they boot real kernels under QEMU (TCG here). They
// skip under -short, and where qemu-system-x86_64 is missing, except under
// CI=true, where a missing QEMU is a failure (.ci/deps installs it).

var captureDir = flag.String("capture", "", "save the console logs of forced crashes in this directory (to refresh kernel/report/testdata)")

func needQEMU(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU VMs: skipped under -short")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-system-x86_64 is missing under CI (.ci/deps installs qemu-system-x86)")
		}
		t.Skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86): cannot boot VMs")
	}
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
	agentDir  string
)

// staticAgent builds a static forkfuzz binary for the guest, once.
func staticAgent(t testing.TB) string {
	t.Helper()
	agentOnce.Do(func() {
		agentDir, agentErr = os.MkdirTemp("", "forkfuzz-agent-")
		if agentErr != nil {
			return
		}
		agentPath = filepath.Join(agentDir, "forkfuzz")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(gobin, "build", "-o", agentPath, "github.com/forkfuzz/forkfuzz/agents/vm/internal/agentbin")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = errors.New("build the static agent: " + err.Error() + ": " + string(out))
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

func repoRoot(t *testing.T) string { return testutil.RepoRoot(t) }

// debianKernel fetches (once, cached) Debian's cloud kernel.
func debianKernel(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("apt-get missing under CI")
		}
		t.Skip("no apt-get: cannot fetch Debian's " + kernel.DefaultImagePackage)
	}
	d, err := kernel.FetchDebian(kernel.DefaultImagePackage, kernel.CacheDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := kernel.IndexModules(d.Modules)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := idx.Resolve(kernel.VirtioModules...)
	if err != nil {
		t.Fatal(err)
	}
	return d.Image, mods
}

// referenceKernel is the prebuilt test kernel in ../shared/kernels (or
// $FORKFUZZ_TEST_KERNEL).
func referenceKernel(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("FORKFUZZ_TEST_KERNEL"); k != "" {
		return k
	}
	// The stock reference kernel, not the Async-fork one beside it.
	m, _ := filepath.Glob(filepath.Join(repoRoot(t), "../shared/kernels/bzImage-*-forkfuzz"))
	if len(m) == 0 {
		m, _ = filepath.Glob(filepath.Join(repoRoot(t), "../shared/kernels/bzImage-*"))
	}
	if len(m) == 0 {
		t.Skip("no reference kernel: set FORKFUZZ_TEST_KERNEL or provide ../shared/kernels/bzImage-* beside the repository")
	}
	return m[0]
}

func bootTarget(t *testing.T, image string, mods []string, hang time.Duration, tf *TargetFile) *Target {
	t.Helper()
	cfg := Config{Kernel: image, Modules: mods, Agent: staticAgent(t), Accel: "auto", TargetFile: tf,
		Workdir: t.TempDir(), HangTimeout: hang, BootTimeout: 90 * time.Second, Log: testLog{t}}
	tg, err := New(cfg)
	if err != nil {
		t.Fatalf("%v\nreproduce with: %s", err, tg0CommandLine(cfg))
	}
	t.Cleanup(func() { tg.Close() })
	t.Logf("booted under %s in %v; QEMU: %s", tg.Accel(), tg.Boots[0].Round(time.Millisecond), tg.CommandLine())
	return tg
}

func tg0CommandLine(cfg Config) string {
	return (&Target{cfg: cfg, initrd: "INITRAMFS"}).CommandLine()
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func examplePrograms(t *testing.T) []*prog.Program {
	ex, err := os.ReadFile(filepath.Join(repoRoot(t), "fuzz/prog/testdata/example.ffz"))
	if err != nil {
		t.Fatal(err)
	}
	return []*prog.Program{mustParse(t, testProg), mustParse(t, string(ex))}
}

func runPrograms(t *testing.T, tg *Target) {
	t.Helper()
	for _, p := range examplePrograms(t) {
		start := time.Now()
		o, err := tg.Run(p, agents.Options{})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if len(o.Ops) != len(p.Ops) || len(o.Views) == 0 {
			t.Fatalf("observation: %d op results for %d ops, %d views", len(o.Ops), len(p.Ops), len(o.Views))
		}
		t.Logf("program of %d ops: %v", len(p.Ops), time.Since(start).Round(time.Millisecond))
	}
	t.Logf("boot to first program's result: %v", tg.FirstProg.Round(time.Millisecond))
}

func capture(t *testing.T, name string, ke *KernelReportError) {
	if *captureDir != "" {
		os.WriteFile(filepath.Join(*captureDir, name), []byte(ke.Console), 0o644)
	}
}

// sysrqCrash crashes the kernel mid-program and expects a kernel report.
func sysrqCrash(t *testing.T, tg *Target, name string) {
	t.Helper()
	boots := len(tg.Boots)
	o, err := tg.run(mustParse(t, testProg), agents.Options{}, testHooks{path: "/proc/sysrq-trigger", value: "c"})
	var ke *KernelReportError
	if !errors.As(err, &ke) {
		t.Fatalf("sysrq crash: got %v, %v; want a kernel report", o, err)
	}
	if ke.Title != "kernel panic: sysrq triggered crash" || ke.Kind != "panic" || !ke.Restarted || !strings.Contains(ke.Program, "fork f0") {
		t.Errorf("sysrq crash: %+v", ke)
	}
	capture(t, "sysrq-crash-"+name+".log", ke)
	// The pool restarts the VM and carries on.
	runPrograms(t, tg)
	if len(tg.Boots) != boots+1 {
		t.Errorf("boots %d, want %d", len(tg.Boots), boots+1)
	}
}

func lkdtmWarning(t *testing.T, tg *Target, image string) {
	t.Helper()
	cfg, src, err := kernel.FindConfig(image)
	if err != nil {
		t.Skipf("cannot tell whether the kernel has LKDTM: %v", err)
	}
	if !cfg.On("CONFIG_LKDTM") {
		t.Skipf("kernel lacks CONFIG_LKDTM (per %s): no way to force a WARNING", src)
	}
	_, err = tg.run(mustParse(t, testProg), agents.Options{}, testHooks{path: "/sys/kernel/debug/provoke-crash/DIRECT", value: "WARNING"})
	var ke *KernelReportError
	if !errors.As(err, &ke) || ke.Kind != "warning" || ke.Restarted {
		t.Fatalf("LKDTM WARNING: got %v", err)
	}
	t.Logf("LKDTM: %s", ke.Title)
	capture(t, "lkdtm-warning-"+filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(image)))))+".log", ke)
	// A WARNING leaves the VM running.
	runPrograms(t, tg)
}

func TestQEMUDebianKernel(t *testing.T) {
	needQEMU(t)
	image, mods := debianKernel(t)
	// A target file with guest set-up and fork-mode steps of every kind
	// (harmless ones: the Debian kernel has no fork toggle).
	tf, err := ParseTargetFile("debian.target", []byte(`
setup = write /proc/sys/vm/overcommit_memory 0
setup = run /forkfuzz help
fork-mode = write /proc/executor/oom_score_adj 100
fork-mode = prctl 41 0   # PR_SET_THP_DISABLE 0: THP stays allowed
`))
	if err != nil {
		t.Fatal(err)
	}
	tg := bootTarget(t, image, mods, 20*time.Second, tf)
	// The target file's two set-up steps (the guest also reports its
	// fork-implementation knobs among the steps).
	var steps []string
	for _, st := range tg.all[0].steps {
		if strings.HasPrefix(st, "setup: ") {
			steps = append(steps, st)
		}
	}
	if len(steps) != 2 || !strings.HasSuffix(steps[0], ": ok") || !strings.HasSuffix(steps[1], ": ok") {
		t.Errorf("set-up steps: %q", tg.all[0].steps)
	}
	o, err := tg.Run(mustParse(t, testProg), agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasEventText(o.Events, "fork-mode: prctl 41 0") {
		t.Errorf("observation does not record the fork-mode steps: %q", o.Events)
	}
	runPrograms(t, tg)

	t.Run("sysrq-crash", func(t *testing.T) { sysrqCrash(t, tg, "debian-cloud-6.1") })
	t.Run("lkdtm-warning", func(t *testing.T) { lkdtmWarning(t, tg, image) })

	t.Run("killed-mid-program", func(t *testing.T) {
		runPrograms(t, tg) // the VM is up
		done := make(chan error, 1)
		go func() {
			_, err := tg.run(mustParse(t, testProg), agents.Options{}, testHooks{holdMs: 5000})
			done <- err
		}()
		time.Sleep(2 * time.Second)
		tg.all[0].proc.kill()
		err := <-done
		var ke *KernelReportError
		var ce *executor.CrashError
		if err == nil || errors.As(err, &ke) || errors.As(err, &ce) || !strings.Contains(err.Error(), "killed from outside") {
			t.Fatalf("got %v, want a harness error (QEMU killed from outside)", err)
		}
		runPrograms(t, tg)
	})

	t.Run("reboot-without-report", func(t *testing.T) {
		_, err := tg.run(mustParse(t, testProg), agents.Options{}, testHooks{path: "/proc/sysrq-trigger", value: "b"})
		var ke *KernelReportError
		if !errors.As(err, &ke) || ke.Kind != "lost-connection" {
			t.Fatalf("got %v, want lost connection", err)
		}
	})

	t.Run("frozen-vm-is-a-hang", func(t *testing.T) {
		runPrograms(t, tg) // boots the VM again after the reboot above
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := tg.run(mustParse(t, testProg), agents.Options{}, testHooks{holdMs: 3000})
			done <- err
		}()
		time.Sleep(time.Second)
		tg.all[0].proc.(*qemuProcess).cmd.Process.Signal(syscall.SIGSTOP)
		err := <-done
		var ke *KernelReportError
		if !errors.As(err, &ke) || ke.Kind != "hang" {
			t.Fatalf("got %v, want a hang", err)
		}
		t.Logf("hang detected after %v: %s", time.Since(start).Round(time.Millisecond), ke.Title)
		runPrograms(t, tg)
	})
}

func TestQEMUReferenceKernel(t *testing.T) {
	needQEMU(t)
	image := referenceKernel(t)
	tg := bootTarget(t, image, nil, 30*time.Second, nil)
	runPrograms(t, tg)
	t.Run("migrate", func(t *testing.T) { migrate(t, tg) })
	t.Run("zeropage-census", func(t *testing.T) { zeropageCensus(t, tg) })
	t.Run("sysrq-crash", func(t *testing.T) { sysrqCrash(t, tg, strings.TrimPrefix(filepath.Base(image), "bzImage-")) })
	t.Run("lkdtm-warning", func(t *testing.T) { lkdtmWarning(t, tg, image) })
}

// TestQEMUThroughput measures boot-to-first-program and programs/s of one
// VM under TCG against the native target, on the same generated programs.
// It is a measurement, not a check: set FORKFUZZ_MEASURE=DURATION (e.g.
// 60s) to run it.
func TestQEMUThroughput(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("FORKFUZZ_MEASURE"))
	if err != nil {
		t.Skip("a measurement: set FORKFUZZ_MEASURE=60s to run it")
	}
	needQEMU(t)
	image, mods := debianKernel(t)
	if k := os.Getenv("FORKFUZZ_MEASURE_KERNEL"); k != "" {
		image, mods = k, nil
	}
	agent := staticAgent(t)
	measure := func(name string, tg agents.Target) {
		n, ops := 0, 0
		start := time.Now()
		for time.Since(start) < d {
			p := gen.Generate(rand.New(rand.NewPCG(1, uint64(n))), gen.DefaultWeights())
			if _, err := tg.Run(p, agents.Options{}); err != nil {
				t.Logf("%s: program %d: %v", name, n, err)
			}
			n++
			ops += len(p.Ops)
		}
		el := time.Since(start)
		t.Logf("%s: %d programs (%d ops) in %v: %.2f programs/s", name, n, ops, el.Round(time.Millisecond), float64(n)/el.Seconds())
	}
	nat := agents.NewNative(func() *exec.Cmd { return exec.Command(agent, "executor") })
	measure("native", nat)
	nat.Close()
	bootStart := time.Now()
	tg := bootTarget(t, image, mods, time.Minute, nil)
	if _, err := tg.Run(mustParse(t, testProg), agents.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("qemu (%s, %s): boot %v, boot to first program's result %v (New to result %v)", tg.Accel(), filepath.Base(image),
		tg.Boots[0].Round(time.Millisecond), tg.FirstProg.Round(time.Millisecond), time.Since(bootStart).Round(time.Millisecond))
	measure("qemu-"+tg.Accel(), tg)
}

// hasEventText reports whether an event's text contains s.
func hasEventText(es []obs.Event, s string) bool {
	for _, e := range es {
		if strings.Contains(e.Text, s) {
			return true
		}
	}
	return false
}

// zeropageCensus runs, in the guest, a program whose main process reads
// an untouched private region and a THP one before a fork, and requires
// the page census to count the shared zeropage and the huge zeropage.
func zeropageCensus(t *testing.T, tg *Target) {
	o, err := tg.Run(mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=8 thp=off\nregion r1 anon-private pages=1024 thp=on\n"+
		"store r0 off=0x0 count=2 stride=0x1000\ncheck\nfork f0\nwait f0\n"), agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.ForkPages) != 1 || !o.ForkPages[0].Flags {
		t.Fatalf("census %+v: want one, with kpageflags read", o.ForkPages)
	}
	if c := o.ForkPages[0]; c.Zero != 6 || c.HugeZero != 1024 || c.THP != 0 {
		t.Errorf("census %+v: want 6 zeropage and 1024 huge zeropage pages, no THP", c)
	}
}
