package layout

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// The README is the newcomer's page: what forkfuzz is, the two set-up
// commands, the commands and where the rest is. Measurements and the long
// explanations live in docs/, one file per topic.
const readmeMaxLines = 350

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]^][^\]]*\]:\s+(\S+)`) // not a footnote ([^1]: text)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// mdLink is one relative link of a Markdown file.
type mdLink struct {
	file   string // the file the link is in, relative to the repository
	line   int
	target string // as written
}

// markdownDoc is what a Markdown file offers and points to.
type markdownDoc struct {
	links   []mdLink
	anchors map[string]bool // GitHub's heading anchors
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped
// (hyphens and underscores kept), spaces made hyphens.
func slug(heading string) string {
	heading = inlineLink.ReplaceAllStringFunc(heading, func(l string) string {
		return l[strings.Index(l, "[")+1 : strings.Index(l, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseMarkdown lists the relative links (outside code) and the heading
// anchors of a Markdown text.
func parseMarkdown(name, text string) markdownDoc {
	doc := markdownDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			h := strings.TrimLeft(trimmed, "#")
			if strings.HasPrefix(h, " ") {
				s := slug(h)
				if n := seen[s]; n > 0 {
					doc.anchors[s+"-"+strconv.Itoa(n)] = true
				} else {
					doc.anchors[s] = true
				}
				seen[s]++
			}
		}
		// A code span may hold a link's text ([`x.ffz`](x.ffz)): keep a
		// placeholder so the link still parses, drop what the span says.
		plain := codeSpan.ReplaceAllString(line, "code")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(plain); m != nil {
			targets = append(targets, m[1])
		}
		for _, tg := range targets {
			if strings.Contains(tg, "://") || strings.HasPrefix(tg, "mailto:") {
				continue
			}
			doc.links = append(doc.links, mdLink{file: name, line: i + 1, target: tg})
		}
	}
	return doc
}

// markdownFiles are the README and every Markdown file under docs/,
// relative to the repository.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files[1:])
	return files
}

// TestDocLinks checks that every relative link of README.md and docs/
// resolves: the file or directory exists, and an anchor (#heading) names a
// heading of the Markdown file it points into.
func TestDocLinks(t *testing.T) {
	root := testutil.RepoRoot(t)
	docs := map[string]markdownDoc{}
	load := func(rel string) (markdownDoc, bool) {
		if d, ok := docs[rel]; ok {
			return d, true
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return markdownDoc{}, false
		}
		d := parseMarkdown(rel, string(data))
		docs[rel] = d
		return d, true
	}
	n := 0
	for _, f := range markdownFiles(t, root) {
		doc, ok := load(f)
		if !ok {
			t.Fatalf("cannot read %s", f)
		}
		for _, l := range doc.links {
			n++
			path, anchor, _ := strings.Cut(l.target, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			target := l.file
			if path != "" {
				if strings.HasPrefix(path, "/") {
					t.Errorf("%s:%d: link %q is absolute: links must be relative to the file", l.file, l.line, l.target)
					continue
				}
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(l.file), path)))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", l.file, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", l.file, l.line, l.target, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			d, ok := load(target)
			if ok && !d.anchors[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", l.file, l.line, l.target, target, anchor)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d relative links found in README.md and docs/: is the parser broken?", n)
	}
}

// TestREADMELinksEveryDoc: every page of docs/ (docs/*.md and a folder's
// README.md) is reachable from the README.
func TestREADMELinksEveryDoc(t *testing.T) {
	root := testutil.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range parseMarkdown("README.md", string(data)).links {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for _, f := range markdownFiles(t, root)[1:] {
		dir, base := filepath.Split(strings.TrimPrefix(f, "docs/"))
		if dir != "" && base != "README.md" {
			continue // a page inside a topic's folder: its README links it
		}
		if !linked[f] && !(base == "README.md" && linked[strings.TrimSuffix(f, "/README.md")]) {
			t.Errorf("README.md does not link to %s", f)
		}
	}
}

// TestREADMEShape keeps the README a newcomer's page: at most
// readmeMaxLines lines, and a Quick start of exactly two commands, the main
// job and the tests (CI's .ci/run calls make test).
func TestREADMEShape(t *testing.T) {
	root := testutil.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move measurements and details to docs/ (one file per topic) and link them", len(lines), readmeMaxLines)
	}
	var cmds []string
	in, fenced := false, false
	for _, line := range lines {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "## Quick start")
			continue
		}
		if !in {
			continue
		}
		if strings.HasPrefix(line, "```") {
			if fenced {
				break // the first code block only
			}
			fenced = true
			continue
		}
		if fenced && strings.TrimSpace(line) != "" {
			cmd, _, _ := strings.Cut(line, "#")
			cmds = append(cmds, strings.TrimSpace(cmd))
		}
	}
	want := []string{"apt-get install -y make && make run", "make test"}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("README.md's Quick start commands are %q, want exactly %q", cmds, want)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		" Gating a patch in CI":                           "gating-a-patch-in-ci",
		" QEMU VMs (`--target qemu`)":                     "qemu-vms---target-qemu",
		" 1. The child's snapshot":                        "1-the-childs-snapshot",
		" Async-fork off vs on [x](y.md)":                 "async-fork-off-vs-on-x",
		" JSON summary (schema `forkfuzz-ci`, version 1)": "json-summary-schema-forkfuzz-ci-version-1",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

func TestParseMarkdown(t *testing.T) {
	doc := parseMarkdown("docs/x.md", "# Title\n\nSee [a](a.md#b), ![img](s.png) and [`c.ffz`](c.ffz).\n"+
		"```\n[not](code.md)\n```\nInline `[not](span.md)` and [web](https://x.org).\n[ref]: r.md\n[^1]: then a footnote\n## Title\n")
	var got []string
	for _, l := range doc.links {
		got = append(got, l.target)
	}
	if want := "a.md#b s.png c.ffz r.md"; strings.Join(got, " ") != want {
		t.Errorf("links %q, want %q", got, want)
	}
	if !doc.anchors["title"] || !doc.anchors["title-1"] {
		t.Errorf("anchors %v", doc.anchors)
	}
}
