package reproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv("FORKFUZZ_TEST_SERVE_EXECUTOR") == "1" {
		executor.Serve()
	}
	os.Exit(m.Run())
}

// native is the host kernel, with this test binary as the executor.
func native(t *testing.T) *agents.Native {
	tg := agents.NewNative(func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = []string{"FORKFUZZ_TEST_SERVE_EXECUTOR=1"}
		return cmd
	})
	t.Cleanup(func() { tg.Close() })
	return tg
}

type entry struct {
	name string
	p    *prog.Program
}

// corpusPrograms returns the seeds and every program of the .ffz files
// under corpus/ (regression files hold several, separated by "====").
func corpusPrograms(t *testing.T) []entry {
	var out []entry
	for _, e := range corpus.Seeds() {
		out = append(out, entry{"seeds/" + e.Name, e.Prog})
	}
	root := testutil.RepoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "corpus", "*", "*.ffz"))
	for _, f := range files {
		if filepath.Base(filepath.Dir(f)) == "seeds" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Join(root, "corpus"), f)
		for n, text := range strings.Split(string(b), "====\n") {
			p, err := prog.Parse([]byte(text))
			if err != nil {
				t.Fatalf("%s #%d: %v", rel, n, err)
			}
			out = append(out, entry{rel + "#" + string(rune('0'+n)), p})
		}
	}
	return out
}

var (
	staticOnce sync.Once
	staticOK   bool
)

// requireGCC skips the test where gcc is missing.
func requireGCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed: the C reproducer cannot be built")
	}
}

// build compiles C source with gcc -O2 -static -pthread (without -static
// when the static C library is missing, said in the log).
func build(t *testing.T, src []byte) string {
	t.Helper()
	return buildAt(t, src, "-O2")
}

// buildAt compiles C source like build, at optimization level level
// ("-O0", "-O2"), with -Wall -Werror.
func buildAt(t *testing.T, src []byte, level string) string {
	t.Helper()
	requireGCC(t)
	dir := t.TempDir()
	c := filepath.Join(dir, "repro.c")
	bin := filepath.Join(dir, "repro")
	if err := os.WriteFile(c, src, 0o644); err != nil {
		t.Fatal(err)
	}
	staticOnce.Do(func() {
		out, err := exec.Command("gcc", "-O2", "-static", "-pthread", c, "-o", bin).CombinedOutput()
		staticOK = err == nil
		if !staticOK {
			t.Logf("gcc -static failed (no static C library?), building dynamically: %v\n%s", err, out)
		}
	})
	args := []string{level, "-Wall", "-Werror", "-pthread", c, "-o", bin}
	if staticOK {
		args = append([]string{"-static"}, args...)
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// runC runs a reproducer and returns its exit status and output.
func runC(t *testing.T, bin string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("reproducer did not exit normally: %v\n%s", err, out.String())
	return -1, ""
}

// hostVerdict runs p with the executor on the host and judges it: 0 clean,
// 1 findings.
func hostVerdict(t *testing.T, tg agents.Target, p *prog.Program, opt agents.Options) (int, string) {
	t.Helper()
	o, runErr := tg.Run(p, opt)
	v, err := judge.Judge(p, o, runErr)
	if err != nil {
		t.Fatalf("judge: %v", err)
	}
	if v.OK() {
		return 0, ""
	}
	var b strings.Builder
	for _, is := range v.Issues {
		b.WriteString(is.Signature + ": " + is.Explanation + "\n")
	}
	return 1, b.String()
}

// hostCannot says why the host cannot run p ("" when it can): a hugetlb
// region needs free 2 MiB hugetlb pages, which most hosts do not reserve.
func hostCannot(tg agents.Target, p *prog.Program) string {
	for _, r := range p.Regions {
		if r.Kind.Hugetlb() && agents.HugetlbPages(tg) < 8 {
			return fmt.Sprintf("a %s region needs free 2 MiB hugetlb pages; the host has %d", r.Kind, agents.HugetlbPages(tg))
		}
		if f := r.Kind.FS(); f != prog.NoFS && !slices.Contains(agents.FileSystemsOf(tg), f) {
			return fmt.Sprintf("a %s region needs a writable directory on %s; the host has none", r.Kind, f)
		}
	}
	return ""
}

// exitUndecided is the C reproducer's exit status when the run left the
// model's predicted path before any failure: nothing after it was judged.
const exitUndecided = 3

// TestCorpusVerdicts: for every corpus program, the C reproducer's
// verdict is the verdict of `forkfuzz exec` (executor + judge) on the
// host; programs it cannot translate are refused with a clear error.
func TestCorpusVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs every corpus program twice (minutes): skipped under -short")
	}
	tg := native(t)
	agree, refused, diverged := 0, 0, 0
	progs := corpusPrograms(t)
	var notRun []string
	for _, e := range progs {
		if why := hostCannot(tg, e.p); why != "" {
			notRun = append(notRun, e.name+": "+why)
			continue
		}
		src, err := Translate(e.p, Options{})
		if err != nil {
			t.Errorf("%s: translation failed: %v", e.name, err)
			refused++
			continue
		}
		bin := build(t, src)
		want, why := hostVerdict(t, tg, e.p, agents.Options{})
		got, out := runC(t, bin)
		if got == exitUndecided && want == 0 {
			// The kernel took another allowed path than the model's
			// prediction: undecided, which the C program says (exit 3).
			got = 0
		}
		if got != want {
			t.Errorf("%s: C reproducer exit %d, forkfuzz exec %d\nexec: %s\nC output:\n%s", e.name, got, want, why, out)
			continue
		}
		if strings.Contains(out, "nothing after this is judged") {
			diverged++
			t.Logf("%s: agreed, but the run left the model's predicted path:\n%s", e.name, out)
		}
		agree++
	}
	t.Logf("%d corpus programs: %d agree (exit status of the C reproducer == forkfuzz exec on the host), %d of them stopped judging at a divergence, %d refused",
		len(progs), agree, diverged, refused)
	if len(notRun) > 0 {
		t.Logf("NOT RUN on the host (TestQEMUVerdicts runs them in a VM): %s", strings.Join(notRun, "; "))
	}
	if agree == 0 {
		t.Fatal("no corpus program was checked")
	}
}

// TestLowArenaVerdicts: corpus programs that map or move memory, run with
// "arena low", get the same verdict from the C reproducer as from the
// executor, and both ran at the low arena (the executor's observation says
// where and still reports canonical addresses).
func TestLowArenaVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs corpus programs twice: skipped under -short")
	}
	tg := native(t)
	checked := 0
	for _, e := range corpusPrograms(t) {
		moves := false
		for _, op := range e.p.Ops {
			moves = moves || op.Kind == prog.OpMremap || op.Kind == prog.OpMmap
		}
		if !moves || checked == 8 || hostCannot(tg, e.p) != "" {
			continue
		}
		p := e.p.Clone()
		p.Arena = prog.ArenaLow
		src, err := Translate(p, Options{})
		if err != nil {
			t.Errorf("%s: translation failed: %v", e.name, err)
			continue
		}
		if !bytes.Contains(src, []byte(fmt.Sprintf("#define ARENA %#xULL", prog.LowArenaBase))) {
			t.Fatalf("%s: the reproducer does not place the arena low", e.name)
		}
		o, err := tg.Run(p, agents.Options{})
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if o.ArenaBase != prog.LowArenaBase {
			t.Errorf("%s: observation's arena base %#x, want %#x", e.name, o.ArenaBase, uint64(prog.LowArenaBase))
		}
		for _, v := range o.Views {
			for _, m := range v.VMAs {
				if m.Start < prog.ArenaBase {
					t.Errorf("%s: view reports the real address %#x, not the canonical one", e.name, m.Start)
				}
			}
		}
		want, why := hostVerdict(t, tg, p, agents.Options{})
		got, out := runC(t, build(t, src))
		if got == exitUndecided && want == 0 {
			got = 0
		}
		if got != want {
			t.Errorf("%s (arena low): C reproducer exit %d, forkfuzz exec %d\nexec: %s\nC output:\n%s", e.name, got, want, why, out)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no corpus program maps or moves memory")
	}
	t.Logf("%d programs with mmap/mremap agree at the low arena", checked)
}

// TestChecksBite: with a falsified expectation of each kind (one per
// oracle family the C checks), the reproducer fails, exit 1, with a line
// naming what it expected and what it saw, like `forkfuzz exec --corrupt`
// does for the executor's observation.
func TestChecksBite(t *testing.T) {
	progs := map[string]string{
		"errno":   "seeds/01-pmd-write-after-fork.ffz",
		"skipped": "seeds/03-mprotect-after-fork.ffz",
		"word":    "seeds/06-memfd-private-pwrite.ffz",
		"state":   "seeds/02-munmap-racing-copy.ffz",
		"prot":    "seeds/03-mprotect-after-fork.ffz",
		"exit":    "seeds/08-kill-right-after-fork.ffz",
		"pipe":    "seeds/13-vmsplice-cow-leak.ffz",
	}
	want := map[string]*regexp.Regexp{
		"errno":   regexp.MustCompile(`FAIL: main process: op 0 .* returned 0 \(success\), expected EPERM`),
		"skipped": regexp.MustCompile(`FAIL: main process: op \d+ .* skipped \d+ slots, expected \d+`),
		"word":    regexp.MustCompile(`FAIL: .* view.*: r\d+ \(.*\) page \d+ offset 0x[0-9a-f]+ \(word \d+\): expected 0x[0-9a-f]+, actual 0x[0-9a-f]+`),
		"state":   regexp.MustCompile(`FAIL: .* view.*: r\d+ \(.*\) pages \d+\.\.\d+ .*: expected unmapped, actual readable`),
		"prot":    regexp.MustCompile(`FAIL: .* view.*: r\d+ page \d+: VMA 0x[0-9a-f]+-0x[0-9a-f]+ has protection r[w-]-[ps], expected r[w-]-[ps]`),
		"exit":    regexp.MustCompile(`FAIL: main process: op \d+ .wait f\d+.: wait status 0x[0-9a-f]+, expected`),
		"pipe":    regexp.MustCompile(`FAIL: main process: op \d+ .readpipe p\d.: page \d+ of the pipe, word \d+ .*: expected 0x[0-9a-f]+, actual 0x[0-9a-f]+`),
	}
	byName := map[string]*prog.Program{}
	for _, e := range corpusPrograms(t) {
		byName[e.name] = e.p
	}
	for _, m := range Mutations() {
		t.Run(m, func(t *testing.T) {
			p := byName[progs[m]]
			if p == nil {
				t.Fatalf("no program %s", progs[m])
			}
			src, err := Translate(p, Options{Mutate: m})
			if err != nil {
				t.Fatal(err)
			}
			code, out := runC(t, build(t, src))
			if code != 1 || !want[m].MatchString(out) {
				t.Fatalf("mutation %s: exit %d, want 1 with a line matching %q; output:\n%s", m, code, want[m], out)
			}
			t.Logf("%s", firstFail(out))
		})
	}
}

func firstFail(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			return l
		}
	}
	return ""
}

// TestCorruptionsAgree: where `forkfuzz exec --corrupt X` makes the host
// run a finding (the executor falsifies what a child saw), the matching
// falsified expectation makes the C reproducer fail too: both verdicts are
// 1 for the same program, and both are 0 without the falsification.
func TestCorruptionsAgree(t *testing.T) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=4
region r1 memfd-private pages=2
store r0 off=0x0 count=4 stride=0x1000
fork f0
store r0 off=0x10 count=2 stride=0x1000
pwrite r1 off=0x0 count=1
f0: check
wait f0
`))
	if err != nil {
		t.Fatal(err)
	}
	tg := native(t)
	src, err := Translate(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c, out := runC(t, build(t, src)); c != 0 {
		t.Fatalf("clean reproducer exit %d:\n%s", c, out)
	}
	if h, why := hostVerdict(t, tg, p, agents.Options{}); h != 0 {
		t.Fatalf("clean host run: %s", why)
	}
	for _, corr := range executor.CorruptionNames() {
		h, why := hostVerdict(t, tg, p, agents.Options{Corrupt: corr})
		src, err := Translate(p, Options{Mutate: "word"})
		if err != nil {
			t.Fatal(err)
		}
		c, out := runC(t, build(t, src))
		if h != 1 || c != 1 {
			t.Fatalf("--corrupt %s: exec verdict %d, C reproducer with a falsified word %d\nexec: %s\nC:\n%s", corr, h, c, why, out)
		}
		t.Logf("--corrupt %s: exec: %sC: %s", corr, why, firstFail(out))
	}
}

// TestRefusals: what the translator cannot express is refused with a
// clear error, never translated wrongly.
func TestRefusals(t *testing.T) {
	bad := &prog.Program{Ops: []prog.Op{{Kind: prog.OpStore, Region: 3, Count: 1, Stride: 8}}}
	if _, err := Translate(bad, Options{}); err == nil || !strings.Contains(err.Error(), "invalid program") {
		t.Errorf("invalid program: got %v", err)
	}
	p, _ := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\n"))
	if _, err := Translate(p, Options{Mutate: "nope"}); err == nil || !strings.Contains(err.Error(), "unknown mutation") {
		t.Errorf("unknown mutation: got %v", err)
	}
	if _, err := Translate(p, Options{Mutate: "pipe"}); err == nil || !strings.Contains(err.Error(), "nothing to mutate") {
		t.Errorf("mutation without a target: got %v", err)
	}
	if _, err := Translate(p, Options{ForkImpl: "vfork"}); err == nil || !strings.Contains(err.Error(), `unknown fork implementation "vfork"`) {
		t.Errorf("unknown fork implementation: got %v", err)
	}
}

const childFailC = `forkfuzz v1
region r0 anon-private pages=1024 thp=off
store r0 off=0x0 count=1024 stride=0x1000
fork f0 childfail=2
f0: store r0 off=0x0 count=1 stride=0x8
f0: check
wait f0
check
`

// TestForkImplAndChildFailHost builds the reproducers of a childfail
// program and of a program under fork-implementation profiles and runs
// them on the host: where the host lacks fault injection or the
// implementation, the reproducer says so (a childfail it cannot apply is
// a note and the run is judged as an ordinary one; a missing fork
// implementation is exit 2, never a pass). The VM tests run them where
// they apply.
func TestForkImplAndChildFailHost(t *testing.T) {
	p, err := prog.Parse([]byte(childFailC))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		impl string
		want []int
		says string
	}{
		{"", []int{0}, "childfail=2"},
		{"stock", []int{0}, "childfail=2"},
		{"async-fork", []int{0, 2}, "async-fork"},
		{"child_oom", []int{0}, "child_oom"},
	} {
		q, opt := p, Options{ForkImpl: c.impl}
		if c.impl == "child_oom" {
			// A limit far above what the child needs: it reaches user
			// space (or, without a memory cgroup of our own, the
			// reproducer says child_oom was not applied).
			if q, err = prog.Parse([]byte(strings.Replace(childFailC, "childfail=2", "child_oom=0x10000000", 1))); err != nil {
				t.Fatal(err)
			}
			opt = Options{}
		}
		src, err := Translate(q, opt)
		if err != nil {
			t.Fatalf("%q: %v", c.impl, err)
		}
		code, out := runC(t, build(t, src))
		if !slices.Contains(c.want, code) || !strings.Contains(out, c.says) {
			t.Fatalf("fork-impl %q: exit %d, want %v, and output naming %q:\n%s", c.impl, code, c.want, c.says, out)
		}
		_, statErr := os.Stat("/sys/fs/cgroup/memory.async_fork")
		if c.impl == "async-fork" && statErr != nil && (code != 2 || !strings.Contains(out, "this kernel does not have it")) {
			t.Fatalf("async-fork on a kernel without it: exit %d, want 2 and the reason:\n%s", code, out)
		}
		t.Logf("fork-impl %q: exit %d\n%s", c.impl, code, out)
	}
}
