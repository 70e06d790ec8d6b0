package kvfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := "# a comment\n" +
		"\n" +
		"   \t\r\n" +
		"  # an indented comment = with an equals sign\n" +
		"kernel = bzImage        # beside the file\n" +
		"cmdline=a  b\n" +
		"run = sh -c \"echo \\\"1\\\" > /x # kept\" \\n\n" +
		"empty =\n" +
		"empty2 = # nothing\n" +
		"joined = a\"b c\"d \"\" x#y\n" +
		"crlf = v\r\n" +
		"eq = a=b\n" +
		"hash=#not a value\n"
	lines, err := Parse("f.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Line{
		{N: 5, Key: "kernel", Words: []string{"bzImage"}, Value: "bzImage"},
		{N: 6, Key: "cmdline", Words: []string{"a", "b"}, Value: "a  b"},
		{N: 7, Key: "run", Words: []string{"sh", "-c", `echo "1" > /x # kept`, `\n`}, Value: `sh -c "echo \"1\" > /x # kept" \n`},
		{N: 8, Key: "empty"},
		{N: 9, Key: "empty2"},
		{N: 10, Key: "joined", Words: []string{"ab cd", "", "x#y"}, Value: `a"b c"d "" x#y`},
		{N: 11, Key: "crlf", Words: []string{"v"}, Value: "v"},
		{N: 12, Key: "eq", Words: []string{"a=b"}, Value: "a=b"},
		{N: 13, Key: "hash"},
	}
	for i := range want {
		want[i].Path = "f.conf"
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("got  %+v\nwant %+v", lines, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		src       string
		want      string // the whole message
		sentinel  error
		line      int
		field     string
		errorText string
	}{
		{"just words", `f:1: want "key = value", got "just words"`, ErrSyntax, 1, "", "just words"},
		{"\n\n  = value  ", `f:3: want "key = value", got "= value"`, ErrSyntax, 3, "", "= value"},
		{"two keys = v", `f:1: want "key = value", got "two keys = v"`, ErrSyntax, 1, "", "two keys = v"},
		{`"k" = v`, `f:1: want "key = value", got "\"k\" = v"`, ErrSyntax, 1, "", `"k" = v`},
		{"k # = v", `f:1: want "key = value", got "k # = v"`, ErrSyntax, 1, "", "k # = v"},
		{`k = "open`, "f:1: unterminated quote", ErrQuote, 1, "", `k = "open`},
		{"ok = 1\nk = a \"b\\\"", "f:2: unterminated quote", ErrQuote, 2, "", `k = a "b\"`},
		{`just "words`, "f:1: unterminated quote", ErrQuote, 1, "", `just "words`},
	} {
		_, err := Parse("f", []byte(c.src))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %v of type %T, want an *Error", c.src, err, err)
			continue
		}
		if err.Error() != c.want || !errors.Is(err, c.sentinel) || e.Line != c.line || e.Field != c.field || e.Text != c.errorText {
			t.Errorf("%q: got %q (line %d, field %q, text %q, Is %v), want %q (line %d, field %q, text %q, Is %v)",
				c.src, err, e.Line, e.Field, e.Text, errors.Is(err, c.sentinel), c.want, c.line, c.field, c.errorText, c.sentinel)
		}
	}
}

func TestLineErrorf(t *testing.T) {
	lines, err := Parse("dir/x.target", []byte("\nmemory = lots\n"))
	if err != nil || len(lines) != 1 {
		t.Fatalf("%v %v", lines, err)
	}
	err = lines[0].Errorf("want a positive integer, got %q", lines[0].Value)
	if got, want := err.Error(), `dir/x.target:2: field memory: want a positive integer, got "lots"`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if errors.Is(err, ErrSyntax) || errors.Is(err, ErrQuote) {
		t.Error("a reader's complaint about a value is a syntax error")
	}
	if got := (&Error{Path: "p", Line: 7, Msg: "m"}).Error(); got != "p:7: m" {
		t.Errorf("without a field: %q", got)
	}
}

func TestSplitWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  \t ", nil, false},
		{"a b\tc\rd", []string{"a", "b", "c", "d"}, false},
		{`"a b"`, []string{"a b"}, false},
		{`""`, []string{""}, false},
		{`"\"" "\\" "\n"`, []string{`"`, `\`, `\n`}, false},
		{`a\"b"`, []string{`a\b`}, false}, // backslash escapes only in quotes
		{"a #b c", []string{"a"}, false},
		{"a#b #c", []string{"a#b"}, false},
		{`"#" x`, []string{"#", "x"}, false},
		{`"a`, nil, true},
		{`"a\"`, nil, true},
		{`a # "open in a comment`, []string{"a"}, false},
	} {
		got, err := SplitWords(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.err)
		}
		if err != nil && !errors.Is(err, ErrQuote) {
			t.Errorf("SplitWords(%q): error %v, want ErrQuote", c.in, err)
		}
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in, key, value string
		ok             bool
	}{
		{"k = v", "k", " v", true},
		{" k=v=w", "k", "v=w", true},
		{"k", "", "", false},
		{" = v", "", "", false},
		{"a b = v", "", "", false},
		{"a\tb = v", "", "", false},
		{`"a" = v`, "", "", false},
	} {
		k, v, ok := Cut(c.in)
		if k != c.key || v != c.value || ok != c.ok {
			t.Errorf("Cut(%q) = %q, %q, %v; want %q, %q, %v", c.in, k, v, ok, c.key, c.value, c.ok)
		}
	}
}

// quote writes w so that SplitWords reads it back as one word.
func quote(w string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
}

// FuzzParse checks that any file either parses or fails with an *Error
// naming the file and a line of it, never panics, and that what it
// parses reads back the same: a line's Value splits into its Words, and
// a line written back as key = "word" ... parses to the same key and words.
func FuzzParse(f *testing.F) {
	f.Add([]byte("kernel = bzImage\nsetup = write /proc/sys/kernel/async_fork 1\nfork-mode = prctl 65 1\n"))
	f.Add([]byte("cmdline = \"a b\" c # comment\nmemory = 2048\n# x = y\n\n"))
	f.Add([]byte("setup = run /bin/sh -c \"echo \\\"1\\\"\"\r\n"))
	f.Add([]byte("token = \"x # y\"\nnkey-user = UABC   # an agent\n"))
	f.Add([]byte("k = \"open\n"))
	f.Add([]byte("no equals sign\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		nlines := strings.Count(string(b), "\n") + 1
		lines, err := Parse("f.conf", b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if e.Path != "f.conf" || e.Line < 1 || e.Line > nlines || !strings.HasPrefix(err.Error(), "f.conf:") {
				t.Fatalf("error naming no line of the file: %+v", e)
			}
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrQuote) {
				t.Fatalf("syntax error without its kind: %v", err)
			}
			return
		}
		prev := 0
		for _, l := range lines {
			if l.N <= prev || l.N > nlines || l.Path != "f.conf" {
				t.Fatalf("line %d after line %d of %d", l.N, prev, nlines)
			}
			prev = l.N
			if l.Key == "" || strings.ContainsAny(l.Key, " \t\"=\n") {
				t.Fatalf("line %d: key %q", l.N, l.Key)
			}
			if w, err := SplitWords(l.Value); err != nil || !reflect.DeepEqual(w, l.Words) {
				t.Fatalf("line %d: Value %q splits into %q, %v; Words are %q", l.N, l.Value, w, err, l.Words)
			}
			if strings.HasPrefix(l.Key, "#") {
				// Reachable only behind a leading non-ASCII space (a key is
				// trimmed with strings.TrimSpace); written back, it is a
				// comment.
				continue
			}
			var back strings.Builder
			back.WriteString(l.Key + " =")
			for _, w := range l.Words {
				back.WriteString(" " + quote(w))
			}
			again, err := Parse("g.conf", []byte(back.String()))
			if err != nil || len(again) != 1 || again[0].Key != l.Key || !reflect.DeepEqual(again[0].Words, l.Words) {
				t.Fatalf("line %d written back as %q parses to %+v, %v; want key %q, words %q", l.N, back.String(), again, err, l.Key, l.Words)
			}
		}
	})
}

// Each reports a file's first mistake: a reader's complaint about line 1
// comes before a syntax error on line 2, and stops the walk.
func TestEachStopsAtTheFirstMistake(t *testing.T) {
	var seen []int
	err := Each("f", []byte("a = 1\nb = 2\nno equals\n"), func(l Line) error {
		seen = append(seen, l.N)
		if l.Key == "b" {
			return l.Errorf("not b")
		}
		return nil
	})
	if err == nil || err.Error() != "f:2: field b: not b" || !reflect.DeepEqual(seen, []int{1, 2}) {
		t.Errorf("error %v after lines %v; want f:2's, after lines 1 and 2", err, seen)
	}
	if _, err := Parse("f", []byte("a = 1\nno equals\n")); err == nil || !strings.HasPrefix(err.Error(), "f:2: ") {
		t.Errorf("Parse: %v", err)
	}
}
