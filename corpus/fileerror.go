package corpus

import (
	"errors"
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// FileError is a program file that does not parse or validate.
type FileError struct {
	File string
	Line int // 1-based; 0 if the error is about the whole program
	Col  int // 1-based; 0 if unknown
	Err  error
}

func (e *FileError) Error() string {
	msg := e.Err.Error()
	var se *prog.SyntaxError
	var ve *prog.ValidationError
	switch {
	case errors.As(e.Err, &se):
		msg = se.Msg
	case errors.As(e.Err, &ve):
		msg = ve.Error()
	}
	switch {
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, msg)
	}
	return fmt.Sprintf("%s: %s", e.File, msg)
}

func (e *FileError) Unwrap() error { return e.Err }

// ParseFile parses the program text of file name; errors are *FileError.
func ParseFile(name string, text []byte) (*prog.Program, error) {
	p, err := prog.Parse(text)
	if err == nil {
		return p, nil
	}
	fe := &FileError{File: name, Err: err}
	var se *prog.SyntaxError
	var ve *prog.ValidationError
	switch {
	case errors.As(err, &se):
		fe.Line, fe.Col = se.Line, se.Col
	case errors.As(err, &ve) && ve.Op >= 0:
		fe.Line = opLine(text, ve.Op)
	}
	return nil, fe
}

// opLine returns the 1-based line of operation i in program text (the
// i-th line, after the header, that is neither blank, a comment, nor a
// region), or 0.
func opLine(text []byte, i int) int {
	header := false
	for n, line := range strings.Split(string(text), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case !header:
			header = true
			continue
		case fields[0] == "region":
			continue
		}
		if i == 0 {
			return n + 1
		}
		i--
	}
	return 0
}
