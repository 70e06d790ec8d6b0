package report

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.want")

func format(reps []*Report) string {
	var b strings.Builder
	for _, r := range reps {
		fmt.Fprintf(&b, "%s\t%s\tfatal=%v\toops=%v\n", r.Title, r.Kind, r.Fatal, r.Oops)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	logs, err := filepath.Glob("testdata/*.log")
	if err != nil || len(logs) == 0 {
		t.Fatalf("no golden logs: %v", err)
	}
	for _, path := range logs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			log, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := format(Parse(log))
			if *update {
				if err := os.WriteFile(path+".want", []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path + ".want")
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
			for _, r := range Parse(log) {
				if r.Text == "" || r.Start >= r.End || r.End > len(log) {
					t.Errorf("bad span %d..%d for %q", r.Start, r.End, r.Title)
				}
			}
			if got != "" && !Contains(log) {
				t.Errorf("Contains missed a log with reports")
			}
		})
	}
}

// The titles the VM target relies on, checked independently of the golden
// files so that -update cannot silently accept a regression.
func TestTitles(t *testing.T) {
	for file, title := range map[string]string{
		"synthetic-warning.log":                  "WARNING in copy_pte_range",
		"synthetic-rss-counter.log":              "BUG: Bad rss-counter state",
		"rss-counter-mutant-rss-thp-6.1.192.log": "BUG: Bad rss-counter state",
		// Not "BUG: non-zero pgtables_bytes on freeing mm: 4096" (the
		// generic BUG pattern): the byte count differs from mm to mm.
		"synthetic-pgtables-bytes.log": "BUG: non-zero pgtables_bytes on freeing mm",
		// The slot number differs from report to report.
		"synthetic-swap-unused.log": "Unused swap offset entry in swap_info_get",
		// Titled from the first report, not the rate limiter's "67421
		// messages suppressed" line before it.
		"synthetic-bad-page-map-storm.log":     "BUG: Bad page map in zap_pte_range",
		"synthetic-page-table-check.log":       "page table check: kernel BUG in page_table_check_set.part.0",
		"synthetic-hung-task.log":              "INFO: task hung in dup_mmap",
		"synthetic-rcu-stall.log":              "INFO: rcu detected stall in async_fork_cpt_ptes",
		"synthetic-gpf.log":                    "general protection fault in __list_del_entry_valid",
		"synthetic-kasan.log":                  "KASAN: use-after-free in copy_pmd_range",
		"synthetic-null-deref.log":             "BUG: kernel NULL pointer dereference in odf_copy_pte_table",
		"sysrq-crash-debian-cloud-6.1.log":     "kernel panic: sysrq triggered crash",
		"sysrq-crash-6.1.192-forkfuzz.log":     "kernel panic: sysrq triggered crash",
		"panic-no-rootfs-6.1.192-forkfuzz.log": "kernel panic: VFS: Unable to mount root fs on unknown-block(0,0)",
	} {
		log, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		r := First(log)
		if r == nil || r.Title != title {
			t.Errorf("%s: got %+v, want title %q", file, r, title)
		}
	}
}

func TestNoReports(t *testing.T) {
	for _, f := range []string{"boot-debian-cloud-6.1.log", "boot-6.1.192-forkfuzz.log"} {
		log, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if r := Parse(log); len(r) != 0 {
			t.Errorf("%s: a clean boot shows reports:\n%s", f, format(r))
		}
	}
	for _, s := range []string{
		"", "hello\n", "[    0.000000] Linux version 6.1.0\n[    1.0] Run /init as init process\n",
		"[    0.5] x86/fpu: Supporting XSAVE feature 0x001: 'x87 floating point registers'\n",
	} {
		if r := Parse([]byte(s)); len(r) != 0 {
			t.Errorf("%q: unexpected reports %s", s, format(r))
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("BUG: Bad rss-counter state mm:0 type:MM_ANONPAGES val:-1\n"))
	f.Add([]byte("WARNING: CPU: 0 PID: 1 at mm/x.c:1 f+0x1/0x2\nKernel panic - not syncing: x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range Parse(b) {
			if r.Start < 0 || r.End > len(b) || r.Start > r.End || r.Title == "" {
				t.Fatalf("bad report %+v", r)
			}
		}
	})
}

// A run's finding is its worst report: a WARNING first (perhaps a known
// issue) must not hide the KASAN report or the Oops after it.
func TestWorst(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	warn, rss, kasan, gpf := read("synthetic-warning.log"), read("synthetic-rss-counter.log"), read("synthetic-kasan.log"), read("synthetic-gpf.log")
	for _, tc := range []struct {
		name string
		log  [][]byte
		want string
	}{
		{"warning alone", [][]byte{warn}, "WARNING in copy_pte_range"},
		{"warning, then KASAN", [][]byte{warn, kasan}, "KASAN: use-after-free in copy_pmd_range"},
		{"rss counter, warning", [][]byte{rss, warn}, "BUG: Bad rss-counter state"},
		{"warning, KASAN, then a fault that kills the task", [][]byte{warn, kasan, gpf}, "general protection fault in __list_del_entry_valid"},
		{"the first of equals", [][]byte{kasan, kasan}, "KASAN: use-after-free in copy_pmd_range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Worst(bytes.Join(tc.log, nil))
			if r == nil || r.Title != tc.want {
				t.Fatalf("Worst = %+v, want %q", r, tc.want)
			}
		})
	}
	if Worst([]byte("hello\n")) != nil {
		t.Fatal("Worst of a log without reports")
	}
}
