package layout

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// layoutRow is one package of the README's layout table.
type layoutRow struct {
	floor int
	name  string // the floor's name ("vocabulary")
	line  int
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readmeLayout reads the table of the README's "## Layout" section: rows
// "| FLOOR NAME | `pkg`[, `pkg`...] | what it holds |". It returns the
// packages by path and the section's line count (0: no such section).
func readmeLayout(t *testing.T, readme string) (map[string]layoutRow, int) {
	t.Helper()
	rows := map[string]layoutRow{}
	in, section := false, 0
	for i, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == "Layout"
			continue
		}
		if !in {
			continue
		}
		section++
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 2 {
			continue
		}
		head := strings.Fields(cells[0])
		if len(head) == 0 {
			continue
		}
		floor, err := strconv.Atoi(head[0])
		if err != nil {
			continue // the header and the separator row
		}
		pkgs := backticked.FindAllStringSubmatch(cells[1], -1)
		if len(pkgs) == 0 {
			t.Errorf("README.md:%d: a layout row names no package (want `path` in its second column)", i+1)
		}
		for _, m := range pkgs {
			p := m[1]
			if prev, dup := rows[p]; dup {
				t.Errorf("README.md:%d: package %s is listed twice in the layout table (also line %d)", i+1, p, prev.line)
			}
			rows[p] = layoutRow{floor: floor, name: strings.Join(head[1:], " "), line: i + 1}
		}
	}
	return rows, section
}

// TestREADMELayout checks the README's layout table against go list ./...
// and the floors map: every package is listed, on the floor its imports
// are checked against, and nothing else is listed.
func TestREADMELayout(t *testing.T) {
	root := testutil.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, section := readmeLayout(t, string(data))
	if section == 0 {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	pkgs := listPackages(t)
	listed := map[string]bool{}
	var missing []string
	for _, p := range pkgs {
		listed[p.path] = true
		want, ok := floorOf(p.path)
		if !ok {
			continue // TestNoUpwardImports reports it
		}
		row, ok := rows[p.path]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (floor %d)", p.path, want))
			continue
		}
		if row.floor != want {
			t.Errorf("README.md:%d: %s is on floor %d in the layout table, but on floor %d in internal/layout's floors map", row.line, p.path, row.floor, want)
		}
	}
	if len(missing) > 0 {
		t.Errorf("README.md's layout table lacks %d package(s) of go list ./...: %s", len(missing), strings.Join(missing, ", "))
	}
	var extra []string
	for p, row := range rows {
		if !listed[p] {
			extra = append(extra, fmt.Sprintf("%s (line %d)", p, row.line))
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("README.md's layout table lists what go list ./... does not: %s", strings.Join(extra, ", "))
	}
	// One name per floor.
	names := map[int]string{}
	for p, row := range rows {
		if row.name == "" {
			continue
		}
		if n, ok := names[row.floor]; ok && n != row.name {
			t.Errorf("README.md:%d: floor %d is called %q here (%s) and %q elsewhere", row.line, row.floor, row.name, p, n)
		}
		names[row.floor] = row.name
	}
}

func TestReadmeLayoutParse(t *testing.T) {
	const readme = "# x\n\n## Layout\n\nText.\n\n| floor | package | what |\n|---|---|---|\n" +
		"| 1 vocabulary | `fuzz/prog` | programs |\n| 2 targets | `agents`, `agents/vm` | targets |\n\n## Development\n\n| 9 nope | `cmd/x` | |\n"
	rows, section := readmeLayout(t, readme)
	if section == 0 {
		t.Fatal("no section found")
	}
	want := map[string]int{"fuzz/prog": 1, "agents": 2, "agents/vm": 2}
	if len(rows) != len(want) {
		t.Fatalf("rows = %v, want %v", rows, want)
	}
	for p, f := range want {
		if rows[p].floor != f {
			t.Errorf("%s: floor %d, want %d", p, rows[p].floor, f)
		}
	}
	if rows["agents/vm"].name != "targets" {
		t.Errorf("floor name %q", rows["agents/vm"].name)
	}
}
