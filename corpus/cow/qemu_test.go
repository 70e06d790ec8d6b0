package cow

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// result is one cow.c case's outcome in KTAP terms.
type result struct {
	status string // "pass", "fail", "skip", "xfail"
	msg    string
}

// cowInitC is PID 1 of the cow.c VM: mounts, swap on /dev/vda (a swap
// area the test wrote), runs /cow with its output on the console.
const cowInitC = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
	mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
	int fd = open("/dev/ttyS0", O_RDWR);
	if (fd >= 0) { dup2(fd, 0); dup2(fd, 1); dup2(fd, 2); }
	setvbuf(stdout, 0, _IONBF, 0);
	mount("proc", "/proc", "proc", 0, 0);
	mount("sysfs", "/sys", "sysfs", 0, 0);
	mount("debugfs", "/sys/kernel/debug", "debugfs", 0, 0);
	mount("tmpfs", "/tmp", "tmpfs", 0, 0);
	printf("@@SWAPON %d\n", swapon("/dev/vda", 0));
	printf("@@START\n");
	pid_t pid = fork();
	if (pid == 0) { execl("/cow", "/cow", (char *)0); _exit(127); }
	int st = 0;
	waitpid(pid, &st, 0);
	printf("@@EXIT %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
`

// TestQEMUCowMatrix runs the real cow.c (Linux 6.12, built statically with
// liburing) in a VM of the reference kernel, and the forkfuzz programs in
// a VM of the same kernel through the guest agent, and puts the two side
// by side, case by case. On the reference kernel neither may fail. The
// cow.c VM gets a 64 MiB swap disk and 4 hugetlb pages of 2 MiB, so its
// swap and 2 MiB hugetlb cases run; the agent VM swaps too
// (forkfuzz.swap=1), and the executor's page census says whether the
// swap kinds' pages really were out at the fork. With FORKFUZZ_COW_DOC=1
// it rewrites the results section of docs/cow.md.
func TestQEMUCowMatrix(t *testing.T) {
	image := needQEMU(t)
	bin := buildCow(t)
	start := time.Now()
	ff, release, accel := runPrograms(t, image, "", 2*time.Minute, nil)
	cases := Cases()
	for _, c := range cases {
		if f, ok := ff[c.Run]; ok && !f.ok {
			t.Errorf("forkfuzz %s on %s: %s", c.File, release, f.report)
		}
	}
	ffTime := time.Since(start)

	start = time.Now()
	console, err := runCowVM(t, image, accel, bin, "", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cowTime := time.Since(start)
	got := parseKTAP(console)
	counts := map[string]int{}
	for i := range cases {
		c := &cases[i]
		r, ok := got[c.Run]
		switch {
		case !ok && strings.HasSuffix(c.Kind.Name, "hugetlb-1g"):
			// cow.c runs the hugetlb sizes /sys/kernel/mm/hugepages
			// lists: no 1 GiB pages without the CPU's pdpe1gb (TCG).
			counts["not run"]++
			continue
		case !ok:
			t.Errorf("cow.c printed no result for %q", c.Run)
			continue
		}
		counts[r.status]++
		if r.status == "fail" {
			t.Errorf("cow.c failed on the reference kernel: %s: %s", c.Run, r.msg)
		}
	}
	if len(got)+counts["not run"] != len(cases) {
		t.Errorf("cow.c ran %d cases (and left %d 1 GiB hugetlb cases out), the table has %d", len(got), counts["not run"], len(cases))
	}
	t.Logf("cow.c on %s (%s): %d cases: %d pass, %d fail, %d skip, %d xfail, %d not run in %v; forkfuzz: %d programs in %v",
		release, accel, len(got), counts["pass"], counts["fail"], counts["skip"], counts["xfail"], counts["not run"], cowTime.Round(time.Second),
		len(ff), ffTime.Round(time.Second))
	table := Matrix(cases, func(c *Case) string {
		cell := got[c.Run].status
		if cell == "" {
			cell = "not run"
		}
		if f, ok := ff[c.Run]; ok {
			v := "pass"
			if !f.ok {
				v = "FAIL"
			}
			if f.note != "" {
				v += " (" + f.note + ")"
			}
			return cell + " / " + v
		}
		return cell + " / -"
	})
	t.Logf("cow.c / forkfuzz on %s:\n%s", release, table)
	if os.Getenv("FORKFUZZ_COW_DOC") == "1" {
		writeResults(t, release, accel, counts, len(got), len(ff), cowTime, ffTime, table, got)
	}
}

// writeResults rewrites the results section of docs/cow.md.
func writeResults(t *testing.T, release, accel string, counts map[string]int, n, nff int, cowTime, ffTime time.Duration,
	table string, got map[string]result) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Written by `FORKFUZZ_COW_DOC=1 go test -run TestQEMUCowMatrix -v ./corpus/cow` on %s (%s, 2 vCPUs, 1 GiB).\n", release, accel)
	fmt.Fprintf(&sb, "cow.c: %d cases ran, %d pass, %d fail, %d skip, %d xfail (%d not run), in %v (boot included); forkfuzz: %d programs, in %v (boot included).\n",
		n, counts["pass"], counts["fail"], counts["skip"], counts["xfail"], counts["not run"], cowTime.Round(time.Second), nff, ffTime.Round(time.Second))
	sb.WriteString("A cell is `cow.c / forkfuzz`. `-`: no forkfuzz program (see the cases above); `not run`: cow.c did not run " +
		"the case (it runs the hugetlb sizes the kernel lists, and this VM's CPU has no 1 GiB pages). A note after forkfuzz's " +
		"`pass` says the program's pages were not what the kind asks for at the body's fork (the executor's page census): " +
		"`not swapped` (MADV_PAGEOUT left the pages resident), `unchecked` (a program without " +
		"a fork has no census).\n")
	sb.WriteString(table)
	skips := map[string]int{}
	for _, r := range got {
		if r.status == "skip" {
			skips[r.msg]++
		}
	}
	sb.WriteString("\ncow.c's reasons for its skips:\n\n")
	for _, m := range slices.Sorted(maps.Keys(skips)) {
		fmt.Fprintf(&sb, "- %s: %d\n", m, skips[m])
	}
	path := filepath.Join(testutil.RepoRoot(t), "docs/cow.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err = ReplaceSection(doc, "results", sb.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	runRE    = regexp.MustCompile(`^# \[RUN\] (.*)$`)
	resultRE = regexp.MustCompile(`^(ok|not ok) \d+ (.*)$`)
)

// parseKTAP maps each "[RUN] ..." line of cow.c's output to the result
// line that follows it.
func parseKTAP(console string) map[string]result {
	out := map[string]result{}
	cur := ""
	for _, line := range strings.Split(console, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := runRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		m := resultRE.FindStringSubmatch(line)
		if m == nil || cur == "" {
			continue
		}
		r := result{status: "pass", msg: m[2]}
		switch {
		case strings.Contains(m[2], "# SKIP"):
			r.status, r.msg = "skip", strings.TrimSpace(m[2][strings.Index(m[2], "# SKIP")+len("# SKIP"):])
		case strings.Contains(m[2], "# XFAIL"):
			r.status = "xfail"
		case m[1] == "not ok":
			r.status = "fail"
		}
		out[cur] = r
		cur = ""
	}
	return out
}

func TestParseKTAP(t *testing.T) {
	console := "# [RUN] Basic COW after fork() ... with base page\nok 1 No leak from parent into child\n" +
		"# [RUN] A ... with swapped out base page\nok 2 # SKIP MADV_PAGEOUT did not work, is swap enabled?\n" +
		"# [RUN] B\nnot ok 3 Leak from parent into child\n# [RUN] C\nok 4 # XFAIL Leak\nok 5 orphan\n"
	got := parseKTAP(console)
	want := map[string]result{
		"Basic COW after fork() ... with base page": {"pass", "No leak from parent into child"},
		"A ... with swapped out base page":          {"skip", "MADV_PAGEOUT did not work, is swap enabled?"},
		"B":                                         {"fail", "Leak from parent into child"},
		"C":                                         {"xfail", "# XFAIL Leak"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%q: %+v, want %+v", k, got[k], w)
		}
	}
}

func needQEMU(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU VMs: skipped under -short")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed: cannot boot VMs")
	}
	if k := os.Getenv("FORKFUZZ_TEST_KERNEL"); k != "" {
		return k
	}
	k := filepath.Join(testutil.RepoRoot(t), "../shared/kernels/bzImage-6.1.192-forkfuzz")
	if _, err := os.Stat(k); err != nil {
		t.Skip("no reference kernel: set FORKFUZZ_TEST_KERNEL or provide ../shared/kernels/bzImage-6.1.192-forkfuzz beside the repository")
	}
	return k
}

// staticAgent builds the guest agent (agents/vm/internal/agentbin).
func staticAgent(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "forkfuzz")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, "github.com/forkfuzz/forkfuzz/agents/vm/internal/agentbin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the static agent: %v\n%s", err, b)
	}
	return out
}

// buildCow builds cow.c with vm_util.c and thp_settings.c statically,
// with liburing (its io_uring cases), or skips.
func buildCow(t *testing.T) string {
	t.Helper()
	dir := cowSource(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed: cannot build cow.c")
	}
	var uring string
	for _, d := range []string{filepath.Join(cowCache(), "uring/usr"), "/usr"} {
		if _, err := os.Stat(filepath.Join(d, "lib/x86_64-linux-gnu/liburing.a")); err == nil {
			uring = d
			break
		}
	}
	if uring == "" {
		t.Skipf("no liburing.a (liburing-dev) in %s/uring/usr or /usr: cow.c's io_uring cases would be left out; .ci/deps unpacks it", cowCache())
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "local_config.h"), []byte("#define LOCAL_CONFIG_HAVE_LIBURING 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "cow")
	tree := filepath.Join(dir, "../../../..")
	args := []string{"-O2", "-static", "-w", "-I", tmp, "-I", filepath.Join(uring, "include"),
		"-isystem", filepath.Join(tree, "tools/include/uapi"),
		filepath.Join(dir, "cow.c"), filepath.Join(dir, "vm_util.c"), filepath.Join(dir, "thp_settings.c"),
		"-L", filepath.Join(uring, "lib/x86_64-linux-gnu"), "-luring", "-o", out}
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Skipf("gcc -static cow.c failed (a VM needs a static binary; install libc6-dev): %v\n%s", err, b)
	}
	return out
}

// swapImage writes a raw disk image of size bytes holding an empty swap
// area (mkswap's header: version 1, last page, "SWAPSPACE2").
func swapImage(t *testing.T, size int64) string {
	t.Helper()
	const page = 4096
	hdr := make([]byte, page)
	binary.LittleEndian.PutUint32(hdr[1024:], 1)                   // version
	binary.LittleEndian.PutUint32(hdr[1028:], uint32(size/page-1)) // last_page
	copy(hdr[page-10:], "SWAPSPACE2")
	path := filepath.Join(t.TempDir(), "swap.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCowVM boots image (extra appended to its command line) with cow as
// the one program and returns the console; an error says the VM did not
// run cow.c to its end within timeout (the console's tail included).
func runCowVM(t *testing.T, image, accel, cow, extra string, timeout time.Duration) (string, error) {
	t.Helper()
	ird := kernel.NewInitramfs()
	for _, d := range []string{"dev", "proc", "sys", "tmp"} {
		ird.Dir(d)
	}
	init := filepath.Join(t.TempDir(), "init.c")
	if err := os.WriteFile(init, []byte(cowInitC), 0o644); err != nil {
		t.Fatal(err)
	}
	initBin := filepath.Join(t.TempDir(), "init")
	if b, err := exec.Command("gcc", "-O2", "-static", init, "-o", initBin).CombinedOutput(); err != nil {
		t.Skipf("gcc -static init failed: %v\n%s", err, b)
	}
	ird.HostFile("init", 0o755, initBin)
	ird.HostFile("cow", 0o755, cow)
	initrd := filepath.Join(t.TempDir(), "initrd.cpio")
	if err := ird.WriteFile(initrd); err != nil {
		t.Fatal(err)
	}
	acc, cpu := "tcg,thread=multi", "max"
	if accel == "kvm" {
		acc, cpu = "kvm", "host"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-accel", acc, "-cpu", cpu, "-m", "1024", "-smp", "2",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
		"-drive", "file="+swapImage(t, 64<<20)+",if=virtio,format=raw",
		"-kernel", image, "-initrd", initrd, "-append", strings.TrimSpace("console=ttyS0 panic=-1 rdinit=/init hugepages=4 "+extra))
	var con bytes.Buffer
	cmd.Stdout, cmd.Stderr = &con, &con
	runErr := cmd.Run()
	console := strings.ReplaceAll(con.String(), "\r", "")
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = fmt.Errorf("no end after %v", timeout)
		}
		return console, fmt.Errorf("qemu: %v\nconsole:\n%s", runErr, tail(console, 4000))
	}
	if !strings.Contains(console, "@@EXIT") {
		return console, fmt.Errorf("the cow.c VM did not finish:\n%s", tail(console, 4000))
	}
	if !strings.Contains(console, "@@SWAPON 0") {
		t.Errorf("swapon /dev/vda failed in the cow.c VM: its swap cases skip:\n%s", tail(console, 2000))
	}
	return console, nil
}

// ffResult is one forkfuzz program's verdict.
type ffResult struct {
	ok     bool   // no finding and no skipped operation
	report string // the verdict's report, or the skipped operations
	sigs   string // the verdict's signatures, comma-separated
	note   string // Held's note on the pages at fork
}

// runPrograms runs the forkfuzz program of every cow.c case that run
// accepts (given how many programs failed so far; nil: every case) in one
// VM of image (extra appended to its command line), each within timeout,
// and judges each.
func runPrograms(t *testing.T, image, extra string, timeout time.Duration, run func(c *Case, failed int) bool) (ff map[string]ffResult, release, accel string) {
	t.Helper()
	tg, err := vm.New(vm.Config{Kernel: image, Agent: staticAgent(t), Accel: "auto", Workdir: t.TempDir(),
		BootTimeout: 3 * time.Minute, ProgramTimeout: timeout, Cmdline: strings.TrimSpace("forkfuzz.swap=1 " + extra)})
	if err != nil {
		t.Fatalf("boot %s: %v", image, err)
	}
	defer tg.Close()
	accel = tg.Accel()
	ff = map[string]ffResult{}
	cases := Cases()
	failed := 0
	for i := range cases {
		c := &cases[i]
		if c.Missing != "" || run != nil && !run(c, failed) {
			continue
		}
		p, err := c.Parse()
		if err != nil {
			t.Fatal(err)
		}
		o, runErr := tg.Run(p, agents.Options{})
		if o != nil && o.Kernel != "" {
			release = o.Kernel
		}
		v, err := judge.Judge(p, o, runErr)
		if err != nil {
			t.Fatalf("%s: judge: %v", c.File, err)
		}
		held, note := Held(c, o)
		r := ffResult{ok: v.OK() && len(v.Skipped) == 0, note: note}
		if !v.OK() {
			r.report, r.sigs = v.Report(), strings.Join(v.Signatures(), ", ")
		}
		for _, s := range v.Skipped {
			r.report += fmt.Sprintf("op %d `%s` skipped: %s\n", s.Op, s.Text, s.Reason)
		}
		ff[c.Run] = r
		if !r.ok {
			failed++
		}
		t.Logf("forkfuzz %s: ok %v; %s", c.File, v.OK(), held)
	}
	return ff, release, accel
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
