package reproc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// asyncForkCmdline is what the Async-fork kernel boots with (see
// agents/vm TestAsyncForkKernel: without seq_fix the vendor's
// write_protect_seq accounting trips a VM_BUG_ON).
const asyncForkCmdline = "async_fork.seq_fix=1"

// bootAsyncFork boots the Async-fork kernel image for the executor's
// runs (with asyncForkCmdline).
func bootAsyncFork(t *testing.T, image string) *vm.Target {
	t.Helper()
	tg, err := vm.New(vm.Config{Kernel: image, Agent: staticAgent(t), Accel: "auto", Workdir: t.TempDir(),
		BootTimeout: 3 * time.Minute, ProgramTimeout: 2 * time.Minute, TargetFile: &vm.TargetFile{Cmdline: asyncForkCmdline}})
	if err != nil {
		t.Fatalf("boot %s: %v", image, err)
	}
	return tg
}

// TestQEMUAsyncForkRepro: C reproducers made with --fork-impl async-fork
// switch Async-fork on for themselves (memory.async_fork=1 on a memory
// cgroup of their own), show per fork that the copy was deferred, and
// arm childfail in the child's own context, where Async-fork copies the
// page tables: with childfail=1 the child dies of its failed copy (SIGKILL)
// and the reproducer goes on with the expectations of a run in which it
// never ran; child_oom puts the child into a limited memory cgroup of its
// own, as the executor does. Their verdicts equal the executor's in a VM of the same
// kernel with the same profile.
func TestQEMUAsyncForkRepro(t *testing.T) {
	needQEMU(t)
	image := testutil.AsyncForkKernel(t)
	var progs []entry
	for _, k := range []int{1, 2, 8, 40} {
		p, err := prog.Parse([]byte(strings.Replace(childFailC, "childfail=2", fmt.Sprintf("childfail=%d", k), 1)))
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, entry{fmt.Sprintf("childfail=%d", k), p})
	}
	for _, lim := range []string{"0x1000", "0x10000000"} {
		p, err := prog.Parse([]byte(strings.Replace(childFailC, "childfail=2", "child_oom="+lim, 1)))
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, entry{"child_oom=" + lim, p})
	}
	plain, err := prog.Parse([]byte(strings.Replace(childFailC, " childfail=2", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	progs = append(progs, entry{"no injection", plain})

	tg := bootAsyncFork(t, image)
	defer tg.Close()
	accel, release := tg.Accel(), ""
	want := make([]int, len(progs))
	died := make([]bool, len(progs))
	for i, e := range progs {
		o, runErr := tg.Run(e.p, agents.Options{ForkImpl: "async-fork"})
		if o != nil && o.Kernel != "" {
			release = o.Kernel
		}
		if err := obs.CheckForkImpl(o); err != nil {
			t.Fatalf("%s: the executor's forks: %v", e.name, err)
		}
		v, err := judge.Judge(e.p, o, runErr)
		if err != nil {
			t.Fatalf("%s: judge: %v", e.name, err)
		}
		if !v.OK() {
			want[i] = 1
		}
		for _, rb := range o.Rollbacks {
			died[i] = died[i] || rb.CopyKilled()
		}
		t.Logf("%s: forkfuzz exec (async-fork): verdict %d, child died of its copy %v", e.name, want[i], died[i])
	}
	tg.Close()

	var srcs [][]byte
	for _, e := range progs {
		src, err := Translate(e.p, Options{Kernel: release, ForkImpl: "async-fork"})
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		srcs = append(srcs, src)
	}
	// The vendor bug forkfuzz found (docs/asyncfork, finding 1), as a
	// standalone C reproducer: 4 runs with Async-fork, 2 with stock fork.
	pinned, err := prog.Parse([]byte(pinnedDMA))
	if err != nil {
		t.Fatal(err)
	}
	// FORKFUZZ_ASYNCFORK_REPRO=N runs it N times each way (for docs/asyncfork).
	nAsync, nStock := 4, 2
	if n, _ := strconv.Atoi(os.Getenv("FORKFUZZ_ASYNCFORK_REPRO")); n > 0 {
		nAsync, nStock = n, n
	}
	pinnedAt := len(srcs)
	impls := slices.Repeat([]string{"async-fork"}, nAsync)
	for _, impl := range append(impls, slices.Repeat([]string{"stock"}, nStock)...) {
		src, err := Translate(pinned, Options{Kernel: release, ForkImpl: impl})
		if err != nil {
			t.Fatalf("pinned-dma (%s): %v", impl, err)
		}
		srcs = append(srcs, src)
	}
	console := runReproVM(t, image, asyncForkCmdline, accel, srcs)
	got := reproExits(console)
	killedC := 0
	for i, e := range progs {
		out := section(console, i)
		c, ok := got[i]
		if c == exitUndecided && want[i] == 0 {
			c = 0
		}
		switch {
		case !ok:
			t.Errorf("%s: no result from the reproducer VM", e.name)
			continue
		case c != want[i]:
			t.Errorf("%s: C reproducer exit %d, forkfuzz exec %d\nC output:\n%s", e.name, c, want[i], out)
		}
		if !strings.Contains(out, "memory.async_fork=1 (read back)") || !strings.Contains(out, "1 forks of the main process deferred their copy, 0 copied eagerly") {
			t.Errorf("%s: the reproducer did not show Async-fork switched on and the fork deferred:\n%s", e.name, out)
		}
		if strings.Contains(out, "killed with SIGKILL on its way to user space") || strings.Contains(out, "the child was killed (SIGKILL) on its way to user space") {
			killedC++
			if !strings.Contains(out, "the expectations are those of a run in which the child of") {
				t.Errorf("%s: the child died but the reproducer did not go on with the expectations of a killed child:\n%s", e.name, out)
			}
		}
		if e.name == "child_oom=0x1000" && died[i] != strings.Contains(out, "the child was killed (SIGKILL) on its way to user space") {
			t.Errorf("%s: the executor's child died of its limit: %v; the reproducer's output:\n%s", e.name, died[i], out)
		}
		if e.name == "childfail=1" && died[i] && !strings.Contains(out, "killed with SIGKILL on its way to user space") {
			t.Errorf("%s: the executor's child died of its failed copy, the reproducer's did not:\n%s", e.name, out)
		}
		t.Logf("%s: C exit %d:\n%s", e.name, got[i], strings.TrimSpace(out))
	}
	if !died[0] {
		t.Errorf("childfail=1 did not kill the executor's child on the Async-fork kernel: the child's copy was not reached")
	}
	t.Logf("%d of %d reproducers saw the child die of its failed copy", killedC, len(progs))

	// The pinned-DMA bug, with the fork's hold (the child stays off the
	// CPU until the parent's io_uring read completed): every Async-fork
	// run fails, the way the bug does (the child's start view holds the
	// parent's post-fork io_uring data in the read pages 511-512); stock
	// fork never fails (measurements: docs/asyncfork/report.md).
	failed := 0
	for k := 0; k < nAsync+nStock; k++ {
		i := pinnedAt + k
		out := section(console, i)
		stock := k >= nAsync
		switch c := got[i]; {
		case stock && c != 0:
			t.Errorf("pinned-dma with stock fork: exit %d, want 0:\n%s", c, out)
		case !stock && c == 1:
			failed++
			// Either read page may show it (each sits in its own PMD):
			// 511 in most runs, 512 alone in some.
			if !strings.Contains(out, "FAIL: child of f0: start view: r0 (anon-private) page 511 offset 0x1ff000 (word 0): expected 0x0, actual 0xa5") &&
				!strings.Contains(out, "FAIL: child of f0: start view: r0 (anon-private) page 512 offset 0x200000 (word 0): expected 0x0, actual 0xa5") {
				t.Errorf("pinned-dma with Async-fork failed, but not as the bug does:\n%s", out)
			}
		case !stock:
			t.Errorf("pinned-dma with Async-fork and hold=1: exit %d, want 1 (the bug):\n%s", c, out)
		}
		if !strings.Contains(out, "the child was held off the CPU for 1 operations") && !strings.Contains(out, "the hold did not hold") {
			t.Errorf("pinned-dma: the reproducer does not say how the hold went:\n%s", out)
		}
	}
	t.Logf("pinned-dma C reproducer: %d of %d runs with Async-fork showed the bug (the child's snapshot holds the parent's post-fork DMA write); stock fork: %d runs, %d passed", failed, nAsync, nStock, countExit(got, 0)-countExitBelow(got, pinnedAt, 0))
}

// pinnedDMA is corpus/regress/asyncfork-pinned-dma.ffz (docs/asyncfork).
const pinnedDMA = `forkfuzz v1
region r0 anon-private pages=1024 thp=default
uringreg r0 off=0x1fe000 len=0x4000
fork f0 hold=1
uringread r0 off=0x1ff000 len=0x2000
wait f0
`

// TestQEMUAsyncForkReproFixed: the pinned-DMA C reproducer (with the
// hold) passes 8 runs of 8 on the Async-fork kernel with the fix
// (kernel.AsyncForkFixedImage; skipped where it was not built), with the
// fork still deferred (the reproducer's own evidence) and the hold held.
func TestQEMUAsyncForkReproFixed(t *testing.T) {
	needQEMU(t)
	image, err := kernel.AsyncForkFixedImage(testutil.RepoRoot(t))
	if err != nil {
		t.Skipf("no fixed Async-fork kernel: %v", err)
	}
	pinned, err := prog.Parse([]byte(pinnedDMA))
	if err != nil {
		t.Fatal(err)
	}
	const runs = 8
	var srcs [][]byte
	for k := 0; k < runs; k++ {
		src, err := Translate(pinned, Options{ForkImpl: "async-fork"})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	console := runReproVM(t, image, "", "auto", srcs)
	got := reproExits(console)
	held := 0
	for k := 0; k < runs; k++ {
		out := section(console, k)
		if c, ok := got[k]; !ok || c != 0 {
			t.Errorf("run %d: exit %d (ran: %v), want 0 on the fixed kernel:\n%s", k, c, ok, out)
		}
		if !strings.Contains(out, "1 forks of the main process deferred their copy, 0 copied eagerly") {
			t.Errorf("run %d: the fork was not asynchronous: this run tested nothing:\n%s", k, out)
		}
		if strings.Contains(out, "the child was held off the CPU for 1 operations") {
			held++
		}
	}
	t.Logf("pinned-dma C reproducer on the fixed kernel: %d runs, %d passed, the hold held in %d", runs, countExit(got, 0), held)
	if held < runs {
		t.Errorf("the hold held in %d of %d runs", held, runs)
	}
}

func countExit(got map[int]int, code int) int {
	n := 0
	for _, c := range got {
		if c == code {
			n++
		}
	}
	return n
}

// countExitBelow counts the reproducers before index end that exited code.
func countExitBelow(got map[int]int, end, code int) int {
	n := 0
	for i, c := range got {
		if i < end && c == code {
			n++
		}
	}
	return n
}

// TestQEMUAsyncForkSeqRepro counts (FORKFUZZ_ASYNCFORK_REPRO=N boots per
// kernel; skipped without it) how often the C reproducer of
// corpus/regress/asyncfork-write-protect-seq-threads.ffz (or
// $FORKFUZZ_SEQ_PROG) makes the kernel BUG:
// the vendor's write_protect_seq accounting (the port's default,
// seq_fix=0) and, where it was built, the fixed kernel, which must never.
// One reproducer a boot: after the BUG the VM is not trusted.
func TestQEMUAsyncForkSeqRepro(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FORKFUZZ_ASYNCFORK_REPRO"))
	if n <= 0 {
		t.Skip("set FORKFUZZ_ASYNCFORK_REPRO=N to boot each kernel N times with the write_protect_seq reproducer")
	}
	needQEMU(t)
	path := filepath.Join(testutil.RepoRoot(t), "corpus/regress/asyncfork-write-protect-seq-threads.ffz")
	if p := os.Getenv("FORKFUZZ_SEQ_PROG"); p != "" {
		path = p
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := prog.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Translate(p, Options{ForkImpl: "async-fork"})
	if err != nil {
		t.Fatal(err)
	}
	kernels := []struct{ name, image string }{{"vendor (seq_fix=0)", testutil.AsyncForkKernel(t)}}
	if fixed, err := kernel.AsyncForkFixedImage(testutil.RepoRoot(t)); err == nil {
		kernels = append(kernels, struct{ name, image string }{"fixed", fixed})
	} else {
		t.Logf("no fixed kernel: %v", err)
	}
	for _, k := range kernels {
		bugs, passed := 0, 0
		for i := 0; i < n; i++ {
			console, err := runReproVMWithin(t, k.image, "", "auto", [][]byte{src}, 90*time.Second)
			bug := strings.Contains(console, "kernel BUG at") || strings.Contains(console, "Oops")
			if bug {
				bugs++
			}
			c, ok := reproExits(console)[0]
			if ok && c == 0 && !bug {
				passed++
			}
			t.Logf("%s boot %d: kernel BUG %v, reproducer exit %d (finished %v), vm: %v", k.name, i, bug, c, ok, err)
			if testing.Verbose() {
				t.Logf("reproducer output:\n%s", section(console, 0))
			}
		}
		t.Logf("%s: the kernel BUGged in %d of %d boots; the reproducer passed in %d", k.name, bugs, n, passed)
		if k.name == "fixed" && bugs > 0 {
			t.Errorf("the fixed kernel BUGged in %d of %d boots", bugs, n)
		}
	}
}

// TestQEMUReproAimsAtChildSite: a childfail finding's C reproducer checks
// where the child's fault hit, as a fail_nth one does. The site and K are
// taken from the executor's run on the Async-fork kernel (the last
// childfail K the kernel reported in the child's copy of the page
// tables), as a finding records them; in the C reproducer, a much smaller
// process, the child copies fewer page tables and that K is not reached:
// it aims childfail down from the child's last point to the site (exit 0,
// the site named), and a made-up site ends UNDECIDED (exit 3) after
// aiming, never ok.
func TestQEMUReproAimsAtChildSite(t *testing.T) {
	needQEMU(t)
	image := testutil.AsyncForkKernel(t)
	tg := bootAsyncFork(t, image)
	defer tg.Close()
	accel, release := tg.Accel(), ""
	// The executor's run: the last childfail K the kernel reported in
	// the child's copy (its child copies the Go process's page tables).
	var p *prog.Program
	var site string
	for k := 1; k <= 60; k++ {
		q, err := prog.Parse([]byte(strings.Replace(childFailC, "childfail=2", fmt.Sprintf("childfail=%d", k), 1)))
		if err != nil {
			t.Fatal(err)
		}
		o, err := tg.Run(q, agents.Options{ForkImpl: "async-fork"})
		if err != nil {
			t.Fatalf("childfail=%d: %v", k, err)
		}
		release = o.Kernel
		reached := false
		for _, rb := range o.Rollbacks {
			if c := rb.Child; c != nil && c.Injection == obs.InjInjected && c.Site == "" && !c.Silent {
				t.Errorf("childfail=%d: injected with no site and not marked silent", k)
			}
			if c := rb.Child; c != nil && c.Injection == obs.InjInjected && c.Phase == obs.PhaseCopy && c.Site != "" {
				p, site, reached = q, c.Site, true
			}
		}
		if !reached {
			break
		}
	}
	if p != nil {
		t.Logf("executor: childfail=%d hit %s", p.Ops[p.ForkOp(0)].ChildFail, site)
	}
	tg.Close()
	if site == "" {
		t.Fatal("no childfail K from 1 to 40 was reported in the child's copy of the page tables")
	}
	fork := p.ForkOp(0)
	sites := SitesOf(p, &obs.Observation{Rollbacks: []obs.Rollback{{Op: fork, Cause: obs.CauseKill,
		Child: &obs.ChildFault{FailNth: p.Ops[fork].ChildFail, Injection: obs.InjInjected, Site: site}}}})
	if len(sites) != 1 || !sites[0].Child || sites[0].Op != fork {
		t.Fatalf("SitesOf = %+v, want the child's site of op %d", sites, fork)
	}
	var srcs [][]byte
	for _, s := range []string{site, "failslab: no_such_allocation"} {
		src, err := Translate(p, Options{Kernel: release, ForkImpl: "async-fork", Sites: []Site{{Op: fork, Child: true, Site: s}}})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	console := runReproVM(t, image, asyncForkCmdline, accel, srcs)
	got := reproExits(console)
	on, off := section(console, 0), section(console, 1)
	if got[0] != 0 || !strings.Contains(on, "aimed: childfail=") || !strings.Contains(on, "the recorded site ("+site+")") {
		t.Errorf("recorded site: exit %d; want 0 with the child's fault on the site:\n%s", got[0], on)
	}
	if got[1] != exitUndecided || !strings.Contains(off, "result: UNDECIDED") || !strings.Contains(off, "running again with childfail=") {
		t.Errorf("a site no K hits: exit %d; want %d after aiming:\n%s", got[1], exitUndecided, off)
	}
	t.Logf("recorded site:\n%s", on)
}
