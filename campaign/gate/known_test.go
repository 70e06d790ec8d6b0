package gate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const knownText = `# known issues of the fork gate
pagetable:pmd-rw-not-restored  target=sim-async*  reason=the async model's rollback (tracked in #13)
kernel-warning/*  release=6.1.*  expires=2026-01-31  reason=an old WARNING
snapshot:lost-store:?non-private reason=glob with a question mark

isolation:*  release=6.1.192  target=qemu  reason=qemu only
`

func TestParseKnownIssues(t *testing.T) {
	k, err := ParseKnownIssues("known.txt", []byte(knownText))
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Entries) != 4 {
		t.Fatalf("%d entries, want 4", len(k.Entries))
	}
	e := k.Entries[0]
	if e.Pattern != "pagetable:pmd-rw-not-restored" || e.Target != "sim-async*" || e.Reason != "the async model's rollback (tracked in #13)" || e.Where != "known.txt:2" {
		t.Fatalf("entry 0: %+v", e)
	}
	now := time.Date(2026, 1, 31, 23, 0, 0, 0, time.UTC)
	cases := []struct {
		sig, rel, tgt string
		want          string // Where of the match, "" for none
	}{
		{"pagetable:pmd-rw-not-restored", "sim-async+x", "sim-async+x", "known.txt:2"},
		{"pagetable:pmd-rw-not-restored", "6.1.192", "qemu", ""},
		{"kernel-warning/WARNING-in-copy_pte_range", "6.1.192", "qemu", "known.txt:3"},
		{"kernel-warning/WARNING-in-copy_pte_range", "6.2.0", "qemu", ""},
		{"snapshot:lost-store:anon-private", "x", "y", "known.txt:4"},
		{"snapshot:lost-store:memfd-private", "x", "y", ""},
		{"isolation:child-store-after-fork:anon-private", "6.1.192", "qemu", "known.txt:6"},
		{"isolation:child-store-after-fork:anon-private", "6.1.192", "native", ""},
	}
	for _, c := range cases {
		m, _ := k.Match(c.sig, c.rel, c.tgt, now)
		got := ""
		if m != nil {
			got = m.Where
		}
		if got != c.want {
			t.Errorf("Match(%q, %q, %q) = %q, want %q", c.sig, c.rel, c.tgt, got, c.want)
		}
	}
	// The expiry day still applies; the next day it does not, and the
	// expired entry is returned for a warning.
	later := time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC)
	m, expired := k.Match("kernel-warning/X", "6.1.1", "qemu", later)
	if m != nil || len(expired) != 1 || expired[0].Where != "known.txt:3" {
		t.Fatalf("after expiry: match %v, expired %v", m, expired)
	}
	if n := len(k.Expired(later)); n != 1 {
		t.Fatalf("%d expired entries, want 1", n)
	}
	var nilK *KnownIssues
	if m, _ := nilK.Match("x", "y", "z", now); m != nil {
		t.Fatal("a nil file matched")
	}
}

// Narrow entries and scoped broad ones are taken; a scoped broad one
// still says what it waives (the gate warns).
func TestKnownIssueWaives(t *testing.T) {
	cases := []struct{ line, waives string }{
		{"kernel-bug/kernel-BUG-in-__copy_page_range reason=x", ""},
		{"snapshot:child-* reason=x", ""},
		{"*:lost-store:anon-private reason=x", ""},
		{"* target=sim-async* reason=x", "every finding"},
		{"kernel-panic/* release=6.1.* reason=x", "every kernel-panic finding"},
	}
	for _, c := range cases {
		k, err := ParseKnownIssues("k", []byte(c.line+"\n"))
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		if got := k.Entries[0].Waives(); got != c.waives {
			t.Errorf("%q waives %q, want %q", c.line, got, c.waives)
		}
	}
}

func TestParseKnownIssuesErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"sig reason=\n", "k:1:reason: empty reason"},
		{"# c\nsig target=x\n", "k:2:reason: missing reason="},
		{"sig expires=31.01.2026 reason=x\n", "k:1:expires: want a date YYYY-MM-DD"},
		{"sig colour=red reason=x\n", `k:1:colour: unknown field "colour"`},
		{"sig release=1 release=2 reason=x\n", "k:1:release: given twice"},
		{"sig target= reason=x\n", "k:1:target: empty value"},
		{"sig oops reason=x\n", "k:1:field: want key=value"},
		{"release=6.1 reason=x\n", "k:1:pattern: the line must start with a signature"},
		{"sig\x01 reason=x\n", "k:1:pattern: the line has non-printable characters"},
		// A crashing kernel must not pass through a catch-all entry.
		{"* reason=x\n", `k:1:pattern: "*" waives every finding`},
		{"*  release=* target=* reason=x\n", `k:1:pattern: "*" waives every finding`},
		{"kernel-* reason=x\n", `k:1:pattern: "kernel-*" waives every finding of the oracles kernel-panic, kernel-bug`},
		{"executor-* reason=x\n", `k:1:pattern: "executor-*" waives every finding of the oracles executor-crash, executor-hang`},
		{"kernel-panic/* reason=x\n", `k:1:pattern: "kernel-panic/*" waives every kernel-panic finding`},
		{"executor-crash reason=x\n", `k:1:pattern: "executor-crash" waives every executor-crash finding`},
		{"snap*:* expires=2030-01-01 reason=x\n", `k:1:pattern: "snap*:*" waives every snapshot finding`},
	}
	for _, c := range cases {
		_, err := ParseKnownIssues("k", []byte(c.text))
		var pe *ParseError
		if err == nil || !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: error %v, want prefix %q", c.text, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error is not one line: %q", c.text, err)
		}
	}
	if _, err := ParseKnownIssues("k", []byte(strings.Repeat("x", MaxKnownIssuesSize+1))); err == nil {
		t.Error("an oversized file was accepted")
	}
}

// FuzzParseKnownIssues: the parser never panics, errors are one line
// naming file:line:field, and what it accepts has a pattern and a reason
// and matches consistently.
func FuzzParseKnownIssues(f *testing.F) {
	f.Add([]byte(knownText))
	f.Add([]byte("a reason=b\n"))
	f.Add([]byte("*  release=* target=* expires=2030-01-01 reason=x y z\n#\n\n"))
	f.Add([]byte("sig expires=2026-13-40 reason=x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKnownIssues("f", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error %q", err)
			}
			return
		}
		for _, e := range k.Entries {
			if e.Pattern == "" || e.Reason == "" || strings.Contains(e.Pattern, "=") {
				t.Fatalf("accepted entry %+v", e)
			}
			// A pattern without glob characters matches itself.
			if !strings.ContainsAny(e.Pattern, "*?") && e.Release == "" && e.Target == "" && !e.Matches(e.Pattern, "r", "t") {
				t.Fatalf("%q does not match itself", e.Pattern)
			}
			_ = e.Matches("snapshot:lost-store:anon-private", "6.1.192", "qemu")
		}
	})
}

func TestBzImageVersion(t *testing.T) {
	hdr := make([]byte, 0x1000)
	copy(hdr[0x202:], "HdrS")
	hdr[0x20e], hdr[0x20f] = 0x00, 0x03 // 0x300 + 0x200
	copy(hdr[0x500:], "6.1.192-forkfuzz (u@h) #1 SMP\x00junk")
	if v := BzImageVersion(hdr); v != "6.1.192-forkfuzz (u@h) #1 SMP" {
		t.Fatalf("version %q", v)
	}
	if v := BzImageVersion([]byte("not a kernel")); v != "" {
		t.Fatalf("version of a non-kernel %q", v)
	}
}
