package forkimpl

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, name := range Names() {
		p, err := Lookup(name)
		if err != nil || p.Name != name {
			t.Errorf("Lookup(%q) = %v, %v", name, p, err)
		}
	}
	_, err := Lookup("fast-fork")
	if err == nil || !strings.Contains(err.Error(), "fast-fork") || !strings.Contains(err.Error(), "async-fork") {
		t.Errorf("unknown profile: %v (want the name and the known ones)", err)
	}
}

// TestProfiles checks the table's shape: what the executor and the C
// reproducer rely on when they apply a profile.
func TestProfiles(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Profiles {
		if seen[p.Name] {
			t.Errorf("profile %q twice", p.Name)
		}
		seen[p.Name] = true
		if p.Doc == "" {
			t.Errorf("%s: no Doc", p.Name)
		}
		if (p.Name == "stock") != (p.Knob == "") {
			t.Errorf("%s: knob %q (only stock has none)", p.Name, p.Knob)
		}
		if len(p.Steps) == 0 {
			t.Errorf("%s: no steps", p.Name)
		}
		for i, s := range p.Steps {
			switch s.Kind {
			case "memcg":
				if s.Path == "" || strings.Contains(s.Path, "/") || s.Value == "" {
					t.Errorf("%s step %d: a memcg step names a file of the executor's own cgroup and a value: %+v", p.Name, i, s)
				}
			case "write":
				if !strings.HasPrefix(s.Path, "/") || s.Value == "" {
					t.Errorf("%s step %d: a write step needs an absolute path and a value: %+v", p.Name, i, s)
				}
			case "prctl":
				if len(s.Args) == 0 || s.Path != "" {
					t.Errorf("%s step %d: a prctl step has arguments and no path: %+v", p.Name, i, s)
				} else if s.Args[0] == 65 {
					t.Errorf("%s step %d: prctl 65 is PR_SET_MDWE on mainline since 6.3", p.Name, i)
				}
			default:
				t.Errorf("%s step %d: unknown kind %q", p.Name, i, s.Kind)
			}
			if p.Name == "stock" && !s.IfPresent {
				t.Errorf("stock step %d must be IfPresent (a kernel without the knob has nothing to switch off)", i)
			}
		}
	}
	if !seen["stock"] || !seen["async-fork"] {
		t.Error("stock and async-fork must be profiles")
	}
}
