// Package fielderr is the error a config's Validate returns for one bad
// field: the config packages (agents/vm, agents/sim, campaign,
// campaign/dist, campaign/gate) name the field, and a command line that
// set it by a flag names the flag instead (cmd/forkfuzz flagError).
package fielderr

// FieldError is a Config field whose value Validate rejects.
type FieldError struct {
	Field string // the Config field: "Budget"
	// Msg follows the field's name in the message: " must be positive,
	// got 0s", ": unknown profile ...".
	Msg string
}

func (e *FieldError) Error() string { return e.Field + e.Msg }

// FieldMsg returns the field and the rest of the message (a command line
// names the flag instead of the field).
func (e *FieldError) FieldMsg() (field, msg string) { return e.Field, e.Msg }
