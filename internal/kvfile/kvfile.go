// Package kvfile is the line grammar of forkfuzz's small configuration
// files: target files (agents/vm) and a distributed campaign's
// configuration (campaign/dist). Their readers walk the lines with Each
// and give the keys their meaning; the grammar and its errors live here
// once.
//
// A file is lines separated by "\n". A line is blank, a comment (its
// first word starts with "#"), or
//
//	key = value    # a comment
//
// The key is the text before the first "=", spaces trimmed: one word, no
// spaces, tabs or double quotes in it. The value is split into words like
// a shell would: spaces, tabs and "\r" separate words; double quotes group
// ("a b" is one word, a"b c"d too), and inside them \" and \\ escape; a
// "#" outside quotes at the start of a word begins a comment. A quote
// left open at the end of the line is an error.
package kvfile

import (
	"errors"
	"fmt"
	"strings"
)

// Line is one "key = value" line.
type Line struct {
	Path  string // the file's name, for errors
	N     int    // line number, from 1
	Key   string
	Words []string // the value split into words (none for "key =")
	// Value is the value as written: the text after "=" up to a comment,
	// spaces, tabs and "\r" trimmed, quotes and escapes kept.
	Value string
}

// Errorf returns an error about l's value, naming its file, line and key.
func (l Line) Errorf(format string, args ...any) *Error {
	return &Error{Path: l.Path, Line: l.N, Field: l.Key, Msg: fmt.Sprintf(format, args...)}
}

// The syntax errors of a line that is no "key = value" (Error.Err).
var (
	ErrSyntax = errors.New(`want "key = value"`)
	ErrQuote  = errors.New("unterminated quote")
)

// Error is a mistake in a file, at a line and, when Field is set, in the
// value of that key.
type Error struct {
	Path  string
	Line  int
	Field string // the key whose value is at fault; "" when the line is
	Msg   string
	// Err is ErrSyntax or ErrQuote when the line's syntax is at fault
	// (errors.Is sees it), nil when a reader of the file complains about
	// a value (Line.Errorf).
	Err error
	// Text is the line at fault, spaces trimmed, when Err is set: for a
	// reader that words syntax errors its own way.
	Text string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: field %s: %s", e.Path, e.Line, e.Field, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Parse returns the "key = value" lines of b, the content of the file
// named path, in order (a key may repeat: what that means is the reader's
// business). It fails with an *Error on the first line that is neither
// blank, a comment nor "key = value".
func Parse(path string, b []byte) ([]Line, error) {
	var lines []Line
	err := Each(path, b, func(l Line) error {
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lines, nil
}

// Each calls fn with every "key = value" line of b (see Parse) in order,
// and stops at the first line that is none (an *Error) or the first error
// fn returns (returned as it is): a file with several mistakes is reported
// at its first.
func Each(path string, b []byte, fn func(Line) error) error {
	for i, text := range strings.Split(string(b), "\n") {
		n := i + 1
		syntax := func(err error, msg string) error {
			return &Error{Path: path, Line: n, Msg: msg, Err: err, Text: strings.TrimSpace(text)}
		}
		words, _, err := split(text)
		if err != nil {
			return syntax(ErrQuote, err.Error())
		}
		if len(words) == 0 {
			continue
		}
		key, value, ok := Cut(text)
		if !ok {
			return syntax(ErrSyntax, fmt.Sprintf("%v, got %q", ErrSyntax, strings.TrimSpace(text)))
		}
		vals, end, err := split(value)
		if err != nil {
			return &Error{Path: path, Line: n, Field: key, Msg: err.Error(), Err: ErrQuote, Text: strings.TrimSpace(text)}
		}
		if err := fn(Line{Path: path, N: n, Key: key, Words: vals, Value: strings.Trim(value[:end], " \t\r")}); err != nil {
			return err
		}
	}
	return nil
}

// Cut splits a line at its first "=" into a key (spaces trimmed) and the
// value's text as written; ok is false when there is no "=" or the key is
// empty or has spaces, tabs or double quotes in it.
func Cut(line string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(line, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" || strings.ContainsAny(key, " \t\"") {
		return "", "", false
	}
	return key, value, true
}

// SplitWords splits s into words: spaces, tabs and "\r" separate, double
// quotes group (with \" and \\ escapes inside), "#" outside quotes at a
// word's start begins a comment. A quote left open is an error.
func SplitWords(s string) ([]string, error) {
	words, _, err := split(s)
	return words, err
}

// split is SplitWords that also says where the comment starts (len(s)
// when there is none).
func split(s string) (words []string, end int, err error) {
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			in = true
		case quoted:
			cur.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return words, i, nil
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, 0, ErrQuote
	}
	if in {
		words = append(words, cur.String())
	}
	return words, len(s), nil
}
