package childsafe

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// cases are the bad snippets of testdata/: each directory is checked
// together with testdata/prelude (a machine with a child flag, a fork
// function, an exit and a well-formed fork site), and must produce
// exactly the findings its `want: rule ...` comments name, at their
// lines, and the rules listed here.
var cases = []struct {
	dir   string
	rules []string
}{
	{"map", []string{"map"}},
	{"defer", []string{"defer", "go"}},
	{"hostpkg", []string{"host-package", "interface"}},
	{"append", []string{"append"}},
	{"alloc", []string{"alloc"}},
	{"iface", []string{"interface"}},
	{"closure", []string{"closure", "funcvalue"}},
	{"concat", []string{"concat"}},
	{"ptrwrite", []string{"pointer-write"}},
	{"unmarked", []string{"host-package", "not-allowed", "unmarked-call"}},
	{"panic", []string{"interface", "panic"}},
	{"chan", []string{"chan"}},
	{"forksite", []string{"fork-site", "unmarked-call"}},
	{"directive", []string{"directive"}},
	{"placement", []string{"placement"}},
	{"good", nil},
}

var wantRE = regexp.MustCompile(`want: ([a-z -]+?)\s*(\*/|$)`)

func check(t *testing.T, dir string) (*Result, map[string]bool) {
	t.Helper()
	var files []string
	want := map[string]bool{}
	for _, d := range []string{"prelude", dir} {
		names, err := filepath.Glob(filepath.Join("testdata", d, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			files = append(files, n)
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if m := wantRE.FindStringSubmatch(line); m != nil {
					for _, r := range strings.Fields(m[1]) {
						want[filepath.Base(n)+":"+strconv.Itoa(i+1)+": "+r] = true
					}
				}
			}
		}
	}
	res, err := Check(Config{
		Files:      files,
		WorkDir:    ".",
		Allow:      map[string]string{"sync/atomic": "intrinsics"},
		ChildFlag:  [2]string{"machine", "inChild"},
		ChildFiles: "child_",
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, want
}

// TestCases: every bad snippet is reported with its file:line and rule,
// and nothing else is.
func TestCases(t *testing.T) {
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			res, want := check(t, c.dir)
			got := map[string]bool{}
			var rules []string
			for _, f := range res.Findings {
				k := filepath.Base(f.Pos.Filename) + ":" + strconv.Itoa(f.Pos.Line) + ": " + f.Rule
				got[k] = true
				if !slices.Contains(rules, f.Rule) {
					rules = append(rules, f.Rule)
				}
				if !want[k] {
					t.Errorf("unexpected finding %s", f)
				}
			}
			for k := range want {
				if !got[k] {
					t.Errorf("missing finding %s", k)
				}
			}
			sort.Strings(rules)
			if !slices.Equal(rules, c.rules) {
				t.Errorf("rules %v, the table says %v", rules, c.rules)
			}
			if len(res.Entries) == 0 {
				t.Errorf("no entries found (the prelude's fork site)")
			}
		})
	}
}

// TestGood: what the good case says about itself.
func TestGood(t *testing.T) {
	res, _ := check(t, "good")
	for _, e := range []string{"(*childsafe/checked.machine).child", "(*childsafe/checked.machine).run"} {
		if !slices.ContainsFunc(res.Entries, func(s string) bool { return strings.HasPrefix(s, e+" ") }) {
			t.Errorf("entry %s not found in %q", e, res.Entries)
		}
	}
	for _, r := range []string{"childsafe/checked.sysExit", "(*childsafe/checked.machine).tail", "childsafe/checked.rawSyscall"} {
		if !slices.Contains(res.Reachable, r) {
			t.Errorf("%s not reachable: %q", r, res.Reachable)
		}
	}
	if slices.Contains(res.Reachable, "(*childsafe/checked.machine).hostThing") {
		t.Errorf("hostThing reachable, but it is only called after !m.inChild &&")
	}
	joined := strings.Join(res.HostOnly, "\n")
	for _, s := range []string{"guarded by !inChild", "else of `if inChild`", "hostonly: a negative n", "hostonly: the main process only",
		"right of `!inChild &&`", "after `if inChild ... { return }`"} {
		if !strings.Contains(joined, s) {
			t.Errorf("host-only parts lack %q:\n%s", s, joined)
		}
	}
	if !slices.Contains(res.Assembly, "childsafe/checked.rawFork") {
		t.Errorf("rawFork not listed as assembly: %q", res.Assembly)
	}
}
