package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// TestSoakReferenceKernel is the gate's false-positive soak: the
// unmodified reference kernel in a VM, `forkfuzz ci` with the default,
// threads and pinned profiles, each for FORKFUZZ_SOAK (e.g. 10m); every
// run must pass (exit 0: no finding, corpus included) and the test logs how
// many programs ran clean. It is long, so it runs only when FORKFUZZ_SOAK
// is set:
//
//	FORKFUZZ_SOAK=10m go test -run TestSoakReferenceKernel -timeout 60m -v ./cmd/forkfuzz
func TestSoakReferenceKernel(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("FORKFUZZ_SOAK"))
	if err != nil {
		t.Skip("a soak of minutes per profile: set FORKFUZZ_SOAK=10m to run it")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("FORKFUZZ_SOAK is set but qemu-system-x86_64 is missing")
	}
	root := testutil.RepoRoot(t)
	image := os.Getenv("FORKFUZZ_TEST_KERNEL")
	if image == "" {
		image = filepath.Join(root, "../shared/kernels/bzImage-6.1.192-forkfuzz")
	}
	if _, err := os.Stat(image); err != nil {
		t.Fatalf("FORKFUZZ_SOAK is set but the reference kernel is missing: %v (set FORKFUZZ_TEST_KERNEL)", err)
	}
	bin := filepath.Join(t.TempDir(), "forkfuzz")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	total := 0
	for _, profile := range []string{"default", "threads", "pinned"} {
		t.Run(profile, func(t *testing.T) {
			dir := t.TempDir()
			jx, jj := filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.json")
			args := []string{"ci", "--target", "qemu", "--kernel", image, "--profile", profile, "--seed", "7",
				"--budget", d.String(), "--junit", jx, "--json", jj, "--workdir", filepath.Join(dir, "w"), "-q",
				"--vm-workdir", filepath.Join(dir, "vm")}
			cmd := exec.Command(bin, args...)
			cmd.Dir = root // the gate replays corpus/regress and corpus/rollback from here
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			cmd.Run()
			r := &ciRun{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
			readResults(t, r, jx, jj)
			t.Logf("forkfuzz %s: exit %d, %d programs (%d corpus, %d fuzzed), %d forks, %d harness errors, %d runs with an unreproduced executor death (harness flakes)\n%s",
				strings.Join(args, " "), r.code, r.res.Programs, r.res.CorpusPrograms, r.res.FuzzPrograms, r.res.Forks, r.res.HarnessErrors, r.res.HarnessFlakeRuns, lastLines(r.stdout, 14))
			var ph []string
			for _, p := range r.res.Phases {
				ph = append(ph, fmt.Sprintf("%s %.1fs", p.Name, p.Seconds))
			}
			t.Logf("profile %s phases: %s; elapsed %.1fs of %.0fs", profile, strings.Join(ph, ", "), r.res.ElapsedS, r.res.BudgetS)
			if r.code != exitClean {
				t.Fatalf("the unmodified reference kernel failed the gate with profile %s (exit %d):\n%s\n%s", profile, r.code, r.stdout, r.stderr)
			}
			total += int(r.res.Programs)
		})
	}
	t.Logf("%d programs ran clean on the reference kernel", total)
}
