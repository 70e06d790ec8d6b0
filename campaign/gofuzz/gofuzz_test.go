package gofuzz

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestGoFuzzRuns builds both go-fuzz entry points with gofuzz.sh (what
// `make gofuzz` runs: it installs go-fuzz from the module proxy) and runs
// each a few seconds: go-fuzz must execute inputs and keep a corpus, and
// the unmodified simulated kernel must give no crasher.
func TestGoFuzzRuns(t *testing.T) {
	if os.Getenv("FORKFUZZ_GOFUZZ") == "" {
		t.Skip("set FORKFUZZ_GOFUZZ=1: builds go-fuzz's instrumented binaries, which recompiles the standard library twice (2-3 minutes on an idle 2-core machine, 10+ under load); make gofuzz does the same")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("gofuzz.sh copies the tree with git ls-files: ", err)
	}
	work := t.TempDir()
	cmd := exec.Command("./gofuzz.sh", "run", work, "8")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gofuzz.sh run: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	execs := regexp.MustCompile(`go-fuzz (sim|parse): corpus (\d+), crashers (\d+)`).FindAllSubmatch(out, -1)
	if len(execs) != 2 {
		t.Fatalf("want a summary line per entry point, got %q", execs)
	}
	for _, m := range execs {
		if n, _ := strconv.Atoi(string(m[2])); n == 0 {
			t.Errorf("go-fuzz %s kept no corpus", m[1])
		}
		if string(m[1]) == "sim" && string(m[3]) != "0" {
			crashers, _ := filepath.Glob(filepath.Join(work, "sim", "crashers", "*.output"))
			for _, c := range crashers {
				b, _ := os.ReadFile(c)
				t.Logf("%s:\n%s", c, b)
			}
			t.Errorf("go-fuzz found %s crashers on the unmodified simulated kernel", m[3])
		}
	}
}
