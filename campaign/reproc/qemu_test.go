package reproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// initC is PID 1 of the reproducer VM: it mounts what the reproducers
// need, runs /r/0, /r/1, ... in turn with their output on the console,
// prints "@@REPRO N exit=E" after each, and powers the VM off.
const initC = `#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
/* setup_ext4 mounts /ext4.sparse (vm.BuildExt4Image's format) on
 * GUEST_EXT4_DIR through a loop device over a file on a tmpfs, as the
 * forkfuzz agent does, for the reproducers' ext4 regions. */
static void setup_ext4(void) {
	int in = open("/ext4.sparse", O_RDONLY);
	if (in < 0) { printf("@@EXT4 none\n"); return; }
	struct stat st;
	fstat(in, &st);
	char *b = malloc(st.st_size);
	ssize_t n = 0;
	while (b && n < st.st_size) { ssize_t r = read(in, b + n, st.st_size - n); if (r <= 0) break; n += r; }
	close(in);
	if (!b || n < 16 || memcmp(b, "FFSPARSE", 8)) { printf("@@EXT4 bad image\n"); return; }
	uint64_t size;
	memcpy(&size, b + 8, 8);
	mkdir("/run", 0755); mkdir("/run/forkfuzz", 0755); mkdir(BACKING, 0700); mkdir(GUEST_EXT4_DIR, 0755);
	char opt[64];
	snprintf(opt, sizeof opt, "size=%llu", (unsigned long long)size + (64 << 20));
	if (mount("tmpfs", BACKING, "tmpfs", 0, opt)) { perror("@@EXT4 tmpfs"); return; }
	int out = open(BACKING "/ext4.img", O_CREAT | O_RDWR, 0600);
	for (ssize_t pos = 16; out >= 0 && pos + 12 <= n;) {
		uint64_t off; uint32_t len;
		memcpy(&off, b + pos, 8); memcpy(&len, b + pos + 8, 4);
		if (len > n - pos - 12 || pwrite(out, b + pos + 12, len, off) != (ssize_t)len) { printf("@@EXT4 bad run\n"); return; }
		pos += 12 + len;
	}
	free(b);
	if (out < 0 || ftruncate(out, size)) { perror("@@EXT4 image"); return; }
	int ctl = open("/dev/loop-control", O_RDWR), nr = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE);
	char dev[32];
	snprintf(dev, sizeof dev, "/dev/loop%d", nr);
	int l = nr < 0 ? -1 : open(dev, O_RDWR);
	if (l < 0 || ioctl(l, LOOP_SET_FD, out)) { perror("@@EXT4 loop"); return; }
	if (mount(dev, GUEST_EXT4_DIR, "ext4", 0, "discard,noinit_itable")) { perror("@@EXT4 mount"); return; }
	printf("@@EXT4 mounted\n");
}
int main(void) {
	mount("devtmpfs", "/dev", "devtmpfs", 0, 0);
	int fd = open("/dev/ttyS0", O_RDWR);
	if (fd < 0) fd = open("/dev/console", O_RDWR);
	if (fd >= 0) { dup2(fd, 0); dup2(fd, 1); dup2(fd, 2); }
	setvbuf(stdout, 0, _IONBF, 0);
	mount("proc", "/proc", "proc", 0, 0);
	mount("sysfs", "/sys", "sysfs", 0, 0);
	mount("debugfs", "/sys/kernel/debug", "debugfs", 0, 0);
	mount("tmpfs", "/tmp", "tmpfs", 0, 0);
	mount("cgroup2", "/sys/fs/cgroup", "cgroup2", 0, 0);
	setup_ext4();
	for (int i = 0;; i++) {
		char path[64];
		snprintf(path, sizeof path, "/r/%d", i);
		if (access(path, X_OK)) break;
		printf("@@START %d\n", i);
		pid_t pid = fork();
		if (pid == 0) { execl(path, path, (char *)0); _exit(127); }
		int st = 0;
		waitpid(pid, &st, 0);
		printf("@@REPRO %d exit=%d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	printf("@@DONE\n");
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
`

// initSource is initC with the paths it needs defined.
func initSource() string {
	return fmt.Sprintf("#define GUEST_EXT4_DIR %q\n#define BACKING \"/run/forkfuzz/ext4-backing\"\n", executor.GuestExt4Dir) + initC
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
	m, _ := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "../shared/kernels/bzImage-*-forkfuzz"))
	if len(m) == 0 {
		t.Skip("no reference kernel: set FORKFUZZ_TEST_KERNEL or provide ../shared/kernels/bzImage-*-forkfuzz beside the repository")
	}
	return m[0]
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

func staticC(t *testing.T, src []byte, name string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed: the C reproducer cannot be built")
	}
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(c, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-static", "-pthread", c, "-o", bin).CombinedOutput(); err != nil {
		t.Skipf("gcc -static failed (a VM needs a static binary; install libc6-dev): %v\n%s", err, out)
	}
	return bin
}

// failNthVariants are programs whose fork carries fault injection, so the
// C reproducer's fail-nth path (and its rollback check) runs in the VM,
// whose kernel has fail-nth.
func failNthVariants(t *testing.T) []entry {
	var out []entry
	for _, n := range []int{1, 3, 8, 20, 60} {
		text := fmt.Sprintf(`forkfuzz v1
region r0 anon-private pages=1024 thp=on
region r1 anon-private pages=64 thp=off
region r2 anon-shared pages=16 thp=default
region r3 memfd-private pages=16 thp=default
store r0 off=0x0 count=1024 stride=0x1000
store r1 off=0x8 count=64 stride=0x1000
store r2 off=0x10 count=16 stride=0x1000
store r3 off=0x20 count=8 stride=0x1000
fork f0 fail_nth=%d
f0: store r1 off=0x28 count=4 stride=0x1000
wait f0
check
`, n)
		p, err := prog.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{fmt.Sprintf("fail_nth=%d", n), p})
	}
	// childfail on stock fork: the child's context before user space
	// has few failure points; what is reached and what it does is
	// judged alike by the executor and the reproducer.
	for _, k := range []int{1, 4} {
		p, err := prog.Parse([]byte(strings.Replace(childFailC, "childfail=2", fmt.Sprintf("childfail=%d", k), 1)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{fmt.Sprintf("childfail=%d", k), p})
	}
	for _, limit := range []string{"0x1000", "0x100000"} {
		p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=2048 thp=off
region r1 anon-shared pages=16 thp=default
store r0 off=0x0 count=2048 stride=0x1000
store r1 off=0x8 count=16 stride=0x1000
fork f0 oom_memcg=` + limit + `
f0: store r0 off=0x10 count=4 stride=0x1000
wait f0
check
`))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{"oom_memcg=" + limit, p})
	}
	return out
}

// TestQEMUVerdicts: the C reproducers of the corpus programs (and of a few
// fault-injected forks), run in a VM booted with the reference kernel,
// give the verdict `forkfuzz exec --target qemu` gives there.
func TestQEMUVerdicts(t *testing.T) {
	image := needQEMU(t)
	progs := append(corpusPrograms(t), failNthVariants(t)...)

	// forkfuzz exec in a VM of that kernel.
	tg, err := vm.New(vm.Config{Kernel: image, Agent: staticAgent(t), Accel: "auto", Workdir: t.TempDir(),
		BootTimeout: 3 * time.Minute, ProgramTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("boot %s: %v", image, err)
	}
	defer tg.Close()
	accel := tg.Accel()
	type row struct {
		e      entry
		want   int
		why    string
		binIdx int
	}
	var rows []row
	release := ""
	for _, e := range progs {
		o, runErr := tg.Run(e.p, agents.Options{})
		if o != nil && o.Kernel != "" {
			release = o.Kernel
		}
		v, err := judge.Judge(e.p, o, runErr)
		if err != nil {
			t.Fatalf("%s: judge: %v", e.name, err)
		}
		w, why := 0, ""
		if !v.OK() {
			w = 1
			for _, is := range v.Issues {
				why += is.Signature + ": " + is.Explanation + "\n"
			}
		}
		rows = append(rows, row{e: e, want: w, why: why})
	}
	tg.Close()
	if release == "" {
		t.Fatal("no observation named the guest kernel's release")
	}
	t.Logf("guest kernel %s under %s; %d programs ran with forkfuzz exec", release, accel, len(rows))
	// The reference kernel has no known fork bug these programs reach:
	// every one of them (the regression programs of known bugs, the
	// rollback programs, the seeds, the fault-injected forks) must pass
	// there, or the oracles would fail a good kernel in every gate.
	clean := 0
	for _, r := range rows {
		if r.want != 0 {
			t.Errorf("%s fails on the reference kernel %s (a false positive, or a kernel bug to name in the file):\n%s", r.e.name, release, r.why)
			continue
		}
		clean++
	}
	t.Logf("%d of %d programs clean on %s", clean, len(rows), release)

	// The reproducers, for that release, in one VM.
	var srcs [][]byte
	for i := range rows {
		src, err := Translate(rows[i].e.p, Options{Kernel: release})
		if err != nil {
			t.Fatalf("%s: %v", rows[i].e.name, err)
		}
		rows[i].binIdx = i
		srcs = append(srcs, src)
	}
	console := runReproVM(t, image, "", accel, srcs)
	got := reproExits(console)
	agree, failnth, injected := 0, 0, 0
	for i, r := range rows {
		c, ok := got[i]
		if c == exitUndecided && r.want == 0 {
			c = 0 // another allowed path: undecided (exit 3), not a failure
		}
		out := section(console, i)
		switch {
		case !ok:
			t.Errorf("%s: no result from the reproducer VM", r.e.name)
		case c != r.want:
			t.Errorf("%s: C reproducer in the VM exit %d, forkfuzz exec in the VM %d\nexec: %s\nC output:\n%s", r.e.name, c, r.want, r.why, out)
		default:
			agree++
			if strings.HasPrefix(r.e.name, "childfail") {
				t.Logf("%s: both %d; C: %s", r.e.name, c, strings.TrimSpace(out))
			}
			if strings.HasPrefix(r.e.name, "fail_nth") || strings.HasPrefix(r.e.name, "oom_memcg") {
				failnth++
				if strings.Contains(out, "(injected)") {
					injected++
					if !strings.Contains(out, "the expectations are those of a run in which") || strings.Contains(out, "nothing after this is judged") {
						t.Errorf("%s: the injected fork failed but the reproducer did not go on with the failing run's expectations:\n%s", r.e.name, out)
					}
				}
				t.Logf("%s: both %d; C: %s", r.e.name, c, strings.TrimSpace(out))
			}
		}
	}
	t.Logf("%d of %d programs agree in the VM (%s, %s), %d of them fault-injected forks (%d failed and were judged on as failed forks)", agree, len(rows), release, accel, failnth, injected)
}

// runReproVM compiles the reproducers statically and runs them, in order,
// in one VM booted from image with initC as PID 1 (cmdline is appended to
// the kernel's); it returns the console.
func runReproVM(t *testing.T, image, cmdline, accel string, srcs [][]byte) string {
	t.Helper()
	console, err := runReproVMWithin(t, image, cmdline, accel, srcs, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return console
}

// runReproVMWithin is runReproVM with a time limit, returning an error
// (with the console's tail) instead of failing the test: a kernel that
// BUGs may leave the VM stuck.
func runReproVMWithin(t *testing.T, image, cmdline, accel string, srcs [][]byte, limit time.Duration) (string, error) {
	t.Helper()
	ird := kernel.NewInitramfs()
	for _, d := range []string{"dev", "proc", "sys", "tmp", "r"} {
		ird.Dir(d)
	}
	ird.HostFile("init", 0o755, staticC(t, []byte(initSource()), "init"))
	if img, err := vm.BuildExt4Image(t.TempDir()); err != nil {
		t.Logf("the reproducer VM has no ext4 (its programs' ext4 regions fail): %v", err)
	} else {
		ird.File("ext4.sparse", 0o600, img)
	}
	for i, src := range srcs {
		ird.HostFile("r/"+strconv.Itoa(i), 0o755, staticC(t, src, "r"+strconv.Itoa(i)))
	}
	initrd := filepath.Join(t.TempDir(), "initrd.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ird.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	acc, cpu := "tcg,thread=multi", "max"
	if accel == "kvm" {
		acc, cpu = "kvm", "host"
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-accel", acc, "-cpu", cpu, "-m", "1024", "-smp", "2",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none",
		"-kernel", image, "-initrd", initrd, "-append", strings.TrimSpace("console=ttyS0 panic=-1 rdinit=/init hugepages=16 "+cmdline))
	var con bytes.Buffer
	cmd.Stdout, cmd.Stderr = &con, &con
	err = cmd.Run()
	console := strings.ReplaceAll(con.String(), "\r", "")
	if err != nil {
		return console, fmt.Errorf("qemu: %v\nconsole:\n%s", err, tail(console, 4000))
	}
	if !strings.Contains(console, "@@DONE") {
		return console, fmt.Errorf("the reproducer VM did not finish:\n%s", tail(console, 4000))
	}
	return console, nil
}

// reproExits maps each reproducer's index to its exit status.
func reproExits(console string) map[int]int {
	re := regexp.MustCompile(`@@REPRO (\d+) exit=(\d+)`)
	got := map[int]int{}
	for _, m := range re.FindAllStringSubmatch(console, -1) {
		i, _ := strconv.Atoi(m[1])
		c, _ := strconv.Atoi(m[2])
		got[i] = c
	}
	return got
}

// section is reproducer i's console output: from its start marker, or,
// when a kernel message printed in the middle of the marker cut it (the
// console interleaves printk with user writes byte by byte), from the
// end of the previous reproducer's exit line.
func section(console string, i int) string {
	start := strings.Index(console, fmt.Sprintf("@@START %d\n", i))
	if start < 0 && i > 0 {
		if p := strings.Index(console, fmt.Sprintf("@@REPRO %d exit=", i-1)); p >= 0 {
			if nl := strings.IndexByte(console[p:], '\n'); nl >= 0 {
				start = p + nl + 1
			}
		}
	}
	if start < 0 {
		return ""
	}
	rest := console[start:]
	if end := strings.Index(rest, fmt.Sprintf("@@REPRO %d ", i)); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestSection: a reproducer's output is found when a kernel message cut
// its start marker.
func TestSection(t *testing.T) {
	console := "@@START 0\nzero\n@@REPRO 0 exit=0\n@@STA[    7.1] FAULT_INJECTION: forcing a failure.\nRT 1\none\n@@REPRO 1 exit=1\n@@START 2\ntwo\n@@REPRO 2 exit=0\n"
	for i, want := range []string{"@@START 0\nzero\n", "@@STA[    7.1] FAULT_INJECTION: forcing a failure.\nRT 1\none\n", "@@START 2\ntwo\n"} {
		if got := section(console, i); got != want {
			t.Errorf("section %d = %q, want %q", i, got, want)
		}
	}
	if got := section(console, 3); got != "" {
		t.Errorf("section 3 = %q, want none", got)
	}
}
