package gate

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ktapLine is one test line of a KTAP document.
type ktapLine struct {
	OK        bool
	Number    int
	Desc      string
	Directive string // "SKIP", "TODO" or ""
	Reason    string
}

var (
	ktapPlanRE   = regexp.MustCompile(`^1\.\.([0-9]+)$`)
	ktapResultRE = regexp.MustCompile(`^(ok|not ok) ([0-9]+)(?: -)?(?: ([^#]*?))?(?: # ?(.*))?$`)
)

// parseKTAP reads a flat KTAP version 1 document (ktap.rst): the version
// line, then the plan, then test lines and diagnostic lines ("#..."); a
// directive is SKIP or TODO. It checks that the test lines are numbered
// 1, 2, ... and that there are as many as the plan says.
func parseKTAP(doc string) ([]ktapLine, error) {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	if len(lines) < 2 || lines[0] != "KTAP version 1" {
		return nil, fmt.Errorf("ktap: first line %q, want \"KTAP version 1\"", lines[0])
	}
	m := ktapPlanRE.FindStringSubmatch(lines[1])
	if m == nil {
		return nil, fmt.Errorf("ktap: second line %q is no plan 1..N", lines[1])
	}
	plan, _ := strconv.Atoi(m[1])
	var tests []ktapLine
	for i, l := range lines[2:] {
		if l == "#" || strings.HasPrefix(l, "# ") {
			continue
		}
		m := ktapResultRE.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("ktap: line %d %q is neither a test line nor a diagnostic line", i+3, l)
		}
		n, _ := strconv.Atoi(m[2])
		tl := ktapLine{OK: m[1] == "ok", Number: n, Desc: m[3]}
		if m[4] != "" {
			tl.Directive, tl.Reason, _ = strings.Cut(m[4], " ")
			if tl.Directive != "SKIP" && tl.Directive != "TODO" {
				return nil, fmt.Errorf("ktap: line %d: directive %q, want SKIP or TODO", i+3, tl.Directive)
			}
		}
		if n != len(tests)+1 {
			return nil, fmt.Errorf("ktap: line %d: test %d after %d", i+3, n, len(tests))
		}
		tests = append(tests, tl)
	}
	if len(tests) != plan {
		return nil, fmt.Errorf("ktap: plan 1..%d but %d test lines", plan, len(tests))
	}
	return tests, nil
}

func TestKTAPGolden(t *testing.T) {
	for name, r := range writerCases() {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteKTAP(&b, r); err != nil {
				t.Fatal(err)
			}
			tests, err := parseKTAP(b.String())
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			if len(tests) != len(r.Oracles)+len(r.Groups) {
				t.Errorf("%d test lines, want one per oracle family and group (%d)", len(tests), len(r.Oracles)+len(r.Groups))
			}
			golden(t, "ktap/"+name+".ktap", b.Bytes())
		})
	}
}

// TestKTAPResults: "not ok" only where the kernel is blamed (a new
// finding); known, pre-existing and harness-flake groups are skipped
// with the reason; an oracle that judged nothing is never a bare "ok";
// harness errors are diagnostic lines.
func TestKTAPResults(t *testing.T) {
	var b bytes.Buffer
	if err := WriteKTAP(&b, writersFindings()); err != nil {
		t.Fatal(err)
	}
	tests, err := parseKTAP(b.String())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ktapLine{}
	for _, tl := range tests {
		name, _, _ := strings.Cut(tl.Desc, " ")
		got[name] = tl
	}
	type want struct {
		ok   bool
		skip string // substring of the SKIP reason ("": no directive)
	}
	for name, w := range map[string]want{
		"snapshot":       {ok: true},
		"memory":         {ok: true},
		"errno":          {ok: true},
		"pipe":           {ok: true, skip: "not exercised: 0 readpipe operations that ran in 40 programs"},
		"rollback":       {ok: false},
		"pagetable":      {ok: false},
		"executor-crash": {ok: true},
		"kernel-kasan":   {ok: true, skip: "CONFIG_KASAN is not set"},
		"G1":             {ok: false},
		"G2":             {ok: true, skip: "pre-existing: also fails on the baseline (2/3 replays)"},
		"G3":             {ok: true, skip: "known: known issue (known.txt:2): upstream, fixed in 6.13"},
		"G4":             {ok: true, skip: "harness-flake: the executor died in 1 run(s) but reproduced 0/3"},
	} {
		tl, found := got[name]
		switch {
		case !found:
			t.Errorf("%s: no test line", name)
		case tl.OK != w.ok:
			t.Errorf("%s: ok=%v, want %v", name, tl.OK, w.ok)
		case w.skip == "" && tl.Directive != "":
			t.Errorf("%s: directive %s %q, want none", name, tl.Directive, tl.Reason)
		case w.skip != "" && (tl.Directive != "SKIP" || !strings.Contains(tl.Reason, w.skip)):
			t.Errorf("%s: directive %s %q, want SKIP with %q", name, tl.Directive, tl.Reason, w.skip)
		}
	}
	out := b.String()
	for _, s := range []string{"# harness error: corpus regress/vmsplice#2.ffz: vm died", "# Totals: pass:4 fail:3 xfail:0 xpass:0 skip:5 error:2",
		"# replay: forkfuzz exec --kernel patched/bzImage forkfuzz-ci/findings/pagetable-pmd/minimized.ffz"} {
		if !strings.Contains(out, s) {
			t.Errorf("no %q in\n%s", s, out)
		}
	}

	b.Reset()
	if err := WriteKTAP(&b, writersHarnessError()); err != nil {
		t.Fatal(err)
	}
	if tests, err = parseKTAP(b.String()); err != nil {
		t.Fatal(err)
	}
	for _, tl := range tests {
		if !tl.OK || tl.Directive != "SKIP" {
			t.Errorf("no program ran, yet %+v", tl)
		}
	}
	if !strings.Contains(b.String(), "# harness error: phase boot: opening the target") {
		t.Errorf("the boot failure is not a diagnostic line:\n%s", b.String())
	}
}

// TestParseKTAPRejects: the test's parser bites.
func TestParseKTAPRejects(t *testing.T) {
	good := "KTAP version 1\n1..2\n# diag\nok 1 a\nnot ok 2 b # SKIP why\n"
	if _, err := parseKTAP(good); err != nil {
		t.Fatalf("good document rejected: %v", err)
	}
	for name, doc := range map[string]string{
		"version":   strings.Replace(good, "KTAP version 1", "TAP version 99", 1),
		"no plan":   strings.Replace(good, "1..2\n", "", 1),
		"plan":      strings.Replace(good, "1..2", "1..3", 1),
		"numbering": strings.Replace(good, "not ok 2", "not ok 3", 1),
		"directive": strings.Replace(good, "# SKIP", "# ERROR", 1),
		"garbage":   good + "oops\n",
	} {
		if _, err := parseKTAP(doc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
