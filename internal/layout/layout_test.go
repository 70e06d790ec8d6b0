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

// TestNoUpwardImports lists every package's non-test imports with go list
// and fails on any import from a lower floor to a higher one.
func TestNoUpwardImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot list imports")
	}
	cmd := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = testutil.RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := floorOf(pkg)
		if !ok {
			t.Errorf("package %s is on no floor: add it to floors (and the README layout)", pkg)
			continue
		}
		n++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to, ok := floorOf(strings.TrimPrefix(imp, module))
			if ok && to > from {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports must not run upward", pkg, from, strings.TrimPrefix(imp, module), to)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d packages listed", n)
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
