package hosttest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

var testExec *executor.Executor

func exe(t testing.TB) *executor.Executor {
	t.Helper()
	if testExec == nil {
		x, err := executor.New()
		if err != nil {
			t.Fatal(err)
		}
		testExec = x
	}
	return testExec
}

// runCheck runs p on the host kernel and checks the observation.
func runCheck(t testing.TB, p *prog.Program) *checker.Verdict {
	t.Helper()
	o, err := exe(t).Run(p, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return checker.Check(p, o)
}

// TestFiles runs every program in the corpus directories (and $PROGS,
// a colon-separated list of files) on the host and expects a clean verdict.
func TestFiles(t *testing.T) {
	var files []string
	for _, dir := range []string{"../../corpus/regress", "../../corpus/seeds", "../../fuzz/prog/testdata"} {
		fs, _ := filepath.Glob(filepath.Join(dir, "*.ffz"))
		files = append(files, fs...)
	}
	if env := os.Getenv("PROGS"); env != "" {
		files = append(files, strings.Split(env, ":")...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, text := range strings.Split(string(b), "====\n") {
			p, err := prog.Parse([]byte(text))
			if err != nil {
				t.Fatalf("%s #%d: %v", f, n, err)
			}
			o, err := exe(t).Run(p, executor.Options{})
			if errors.Is(err, executor.ErrNoHugetlb) {
				// Hugetlb regions: the host reserves no huge pages
				// (the gate and the VM tests replay these).
				t.Logf("NOT RUN on the host: %s #%d: %v", f, n, err)
				continue
			}
			if err != nil {
				t.Fatalf("%s #%d: %v", f, n, err)
			}
			if v := checker.Check(p, o); !v.OK() {
				t.Errorf("%s #%d: %s", f, n, v.Report())
			}
		}
	}
}

// TestExecutorCorruptions checks that the executor's test-only corruptions
// are caught with the right oracle.
func TestExecutorCorruptions(t *testing.T) {
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
	want := map[string]string{"child-sees-parent-write": "isolation", "child-misses-write": "snapshot|shared"}
	for _, name := range executor.CorruptionNames() {
		o, err := exe(t).Run(p, executor.Options{Corrupt: name})
		if err != nil {
			t.Fatal(err)
		}
		v := checker.Check(p, o)
		if v.OK() {
			t.Errorf("%s: not detected", name)
			continue
		}
		if w, ok := want[name]; ok && !strings.Contains("|"+w+"|", "|"+string(v.Findings[0].Oracle)+"|") {
			t.Errorf("%s: oracle %s, want %s", name, v.Findings[0].Oracle, w)
		}
		t.Logf("%s:\n%s", name, v.Report())
	}
}
