package layout

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

const module = "github.com/forkfuzz/forkfuzz/"

// floors maps a package path prefix (longest match wins) to its floor.
var floors = map[string]int{
	"fuzz/prog": 1, "fuzz/obs": 1, "fuzz/gen": 1, "fuzz/minimize": 1, "corpus": 1, "kernel": 1,
	"internal": 1,
	"agents":   2,
	"checker":  3,
	"campaign": 4,
	"cmd":      5,
	"tools":    5,
	// Benchmarks and scenarios: built on the campaign floor, used only
	// by commands.
	"bench": 5,
}

func floorOf(pkg string) (int, bool) {
	best, floor := "", 0
	for prefix, f := range floors {
		if (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > len(best) {
			best, floor = prefix, f
		}
	}
	return floor, best != ""
}

// pkgImports is one package of go list ./... with its non-test imports,
// both relative to the module.
type pkgImports struct {
	path    string
	imports []string
}

// listPackages runs go list ./... in the repository (skipping the test
// without a go command) and returns every package with its module imports.
func listPackages(t *testing.T) []pkgImports {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot list packages")
	}
	cmd := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = testutil.RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkgImports
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		p := pkgImports{path: strings.TrimPrefix(fields[0], module)}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				p.imports = append(p.imports, strings.TrimPrefix(imp, module))
			}
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list ./... listed only %d packages", len(pkgs))
	}
	return pkgs
}

// TestNoUpwardImports lists every package's non-test imports with go list
// and fails on any import from a lower floor to a higher one.
func TestNoUpwardImports(t *testing.T) {
	for _, p := range listPackages(t) {
		from, ok := floorOf(p.path)
		if !ok {
			t.Errorf("package %s is on no floor: add it to floors (and to the README's layout table)", p.path)
			continue
		}
		for _, imp := range p.imports {
			to, ok := floorOf(imp)
			if ok && to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports must not run upward", p.path, from, imp, to)
			}
		}
	}
}

func TestFloorOf(t *testing.T) {
	for pkg, want := range map[string]int{"fuzz/prog": 1, "fuzz/obs": 1, "kernel/report": 1, "agents/sim": 2, "agents": 2,
		"checker/judge": 3, "campaign/dist": 4, "cmd/forkfuzz": 5} {
		if got, ok := floorOf(pkg); !ok || got != want {
			t.Errorf("floorOf(%s) = %d, %v; want %d", pkg, got, ok, want)
		}
	}
	if _, ok := floorOf("fuzzy"); ok {
		t.Error("a prefix matched a longer name")
	}
}
