package executor

import "strings"

// TextError is an error an executor reported across a process or VM
// boundary as text (the plugin's reply, the guest agent's message). It
// unwraps to the sentinel error the text names (ErrNoHugetlb,
// ErrNoFileSystem), if any: errors.Is finds a refusal again on this side,
// and the target's refusal is not taken for a harness error.
type TextError struct {
	Msg string
	is  error
}

func (e *TextError) Error() string { return e.Msg }
func (e *TextError) Unwrap() error { return e.is }

// FromText is the error of a reported text: prefix, then msg, unwrapping
// to the sentinel msg names.
func FromText(prefix, msg string) *TextError {
	e := &TextError{Msg: prefix + msg}
	for _, s := range []error{ErrNoHugetlb, ErrNoFileSystem} {
		if strings.Contains(msg, s.Error()) {
			e.is = s
		}
	}
	return e
}
