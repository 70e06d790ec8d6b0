package gate

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
)

// KnownIssue is one entry of a known-issues file: findings it matches are
// reported, not gated.
//
// The file format (documented in docs/ci.md) is line based; '#' starts a
// comment line, blank lines are ignored, and every other line is
//
//	PATTERN [release=GLOB] [target=GLOB] [expires=YYYY-MM-DD] reason=TEXT...
//
// PATTERN is a finding signature or a glob over signatures ('*' matches
// any run of characters, '/' included; '?' one character). release= is a
// glob over the kernel release of the kernel under test (the uname -r of
// a bzImage, the host's for native, the target name such as
// "sim-async+async-rollback-partial" for the simulated kernel); target= a
// glob over the target name ("qemu", "native", "sim-async", ...). Both
// default to "*". expires= is the last day (UTC) the entry applies; from
// the next day on it no longer matches and the gate warns. reason= takes
// the rest of the line and must be there and non-empty.
type KnownIssue struct {
	Pattern string
	Release string // glob, "" = any
	Target  string // glob, "" = any
	Expires time.Time
	Reason  string
	// Where the entry came from: "known.txt:12".
	Where string

	pat, rel, tgt *regexp.Regexp
}

// KnownIssues is a parsed known-issues file.
type KnownIssues struct {
	Entries []KnownIssue
}

// ParseError names the file, line and field of a bad entry.
type ParseError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d:%s: %s", e.File, e.Line, e.Field, e.Msg)
}

// MaxKnownIssuesSize bounds a known-issues file.
const MaxKnownIssuesSize = 1 << 20

// ReadKnownIssues reads and parses a known-issues file.
func ReadKnownIssues(path string) (*KnownIssues, error) {
	b, err := fsutil.ReadFileLimited(path, MaxKnownIssuesSize)
	if err != nil {
		return nil, err
	}
	return ParseKnownIssues(path, b)
}

// ParseKnownIssues parses the text of a known-issues file named file.
func ParseKnownIssues(file string, text []byte) (*KnownIssues, error) {
	if len(text) > MaxKnownIssuesSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, MaxKnownIssuesSize)
	}
	ki := &KnownIssues{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, MaxKnownIssuesSize+1)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		perr := func(field, format string, args ...any) error {
			return &ParseError{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
		}
		if !isPrintable(l) {
			return nil, perr("pattern", "the line has non-printable characters")
		}
		e := KnownIssue{Where: fmt.Sprintf("%s:%d", file, line)}
		rest := l
		e.Pattern, rest = cutField(rest)
		if strings.Contains(e.Pattern, "=") {
			return nil, perr("pattern", "the line must start with a signature or pattern, not %q", short(e.Pattern))
		}
		seen := map[string]bool{}
		for rest != "" {
			var f string
			if strings.HasPrefix(rest, "reason=") {
				e.Reason = strings.TrimSpace(strings.TrimPrefix(rest, "reason="))
				if e.Reason == "" {
					return nil, perr("reason", "empty reason")
				}
				seen["reason"] = true
				break
			}
			f, rest = cutField(rest)
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, perr("field", "want key=value (release=, target=, expires=, reason=), got %q", short(f))
			}
			if seen[k] {
				return nil, perr(k, "given twice")
			}
			seen[k] = true
			if v == "" {
				return nil, perr(k, "empty value")
			}
			switch k {
			case "release":
				e.Release = v
			case "target":
				e.Target = v
			case "expires":
				t, err := time.Parse("2006-01-02", v)
				if err != nil {
					return nil, perr(k, "want a date YYYY-MM-DD, got %q", short(v))
				}
				e.Expires = t
			default:
				return nil, perr(k, "unknown field %q (want release, target, expires or reason)", short(k))
			}
		}
		if !seen["reason"] {
			return nil, perr("reason", "missing reason= (every known issue says why it is accepted)")
		}
		e.pat, e.rel, e.tgt = globRE(e.Pattern), globRE(e.Release), globRE(e.Target)
		if cls := e.Waives(); cls != "" && !e.Scoped() {
			return nil, perr("pattern", "%q waives %s: a crashing kernel would pass the gate; name the signature, or scope the entry with release= or target=", short(e.Pattern), cls)
		}
		ki.Entries = append(ki.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{File: file, Line: line + 1, Field: "line", Msg: err.Error()}
	}
	return ki, nil
}

func cutField(s string) (string, string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

func isPrintable(s string) bool {
	for _, c := range s {
		if c < 0x20 && c != '\t' || c == 0x7f || c == 0xfffd {
			return false
		}
	}
	return true
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// globRE compiles a glob ('*' any run, '?' one character) anchored at
// both ends; "" matches anything.
func globRE(g string) *regexp.Regexp {
	if g == "" {
		g = "*"
	}
	var b strings.Builder
	b.WriteString("^")
	for _, c := range g {
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// Expired reports whether e no longer applies at now (after its expiry day).
func (e *KnownIssue) Expired(now time.Time) bool {
	return !e.Expires.IsZero() && now.UTC().After(e.Expires.Add(24*time.Hour))
}

// Matches reports whether e (expired or not) covers a finding with
// signature sig on a kernel with release rel and target tgt.
func (e *KnownIssue) Matches(sig, rel, tgt string) bool {
	return e.pat.MatchString(sig) && e.rel.MatchString(rel) && e.tgt.MatchString(tgt)
}

// Match returns the first unexpired entry matching the finding, and the
// expired entries that would have matched.
func (k *KnownIssues) Match(sig, rel, tgt string, now time.Time) (*KnownIssue, []*KnownIssue) {
	if k == nil {
		return nil, nil
	}
	var expired []*KnownIssue
	for i := range k.Entries {
		e := &k.Entries[i]
		if !e.Matches(sig, rel, tgt) {
			continue
		}
		if e.Expired(now) {
			expired = append(expired, e)
			continue
		}
		return e, expired
	}
	return nil, expired
}

// Expired returns the entries past their expiry at now.
func (k *KnownIssues) Expired(now time.Time) []*KnownIssue {
	if k == nil {
		return nil
	}
	var out []*KnownIssue
	for i := range k.Entries {
		if k.Entries[i].Expired(now) {
			out = append(out, &k.Entries[i])
		}
	}
	return out
}

// classProbe is a signature suffix no real finding has: a pattern that
// matches an oracle followed by it matches every finding of that oracle.
const classProbe = "zz-forkfuzz-probe-9q"

// Waives names the class of findings e matches as a whole ("every
// finding", "every kernel-panic finding", ...), or "" when its pattern
// is narrower than an oracle.
func (e *KnownIssue) Waives() string {
	if e.pat == nil {
		e.pat = globRE(e.Pattern)
	}
	if e.pat.MatchString(classProbe) {
		return "every finding"
	}
	var all []string
	for _, in := range oracle.Table {
		all = append(all, string(in.Name))
	}
	var hit []string
	for _, o := range all {
		for _, sig := range []string{o, o + ":" + classProbe, o + "/" + classProbe} {
			if e.pat.MatchString(sig) {
				hit = append(hit, o)
				break
			}
		}
	}
	switch len(hit) {
	case 0:
		return ""
	case 1:
		return "every " + hit[0] + " finding"
	}
	return "every finding of the oracles " + strings.Join(hit, ", ")
}

// Scoped reports whether e is limited to some kernel releases or targets.
func (e *KnownIssue) Scoped() bool {
	return e.Release != "" && e.Release != "*" || e.Target != "" && e.Target != "*"
}
