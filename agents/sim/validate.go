package sim

import (
	"fmt"

	"github.com/forkfuzz/forkfuzz/internal/fielderr"
)

// DefaultConfig is the simulated kernel of a command line without flags:
// the eager fork, no mutant, no injected failures, scheduler seed 0.
func DefaultConfig() Config { return Config{Mode: Eager} }

// FieldError is a Config field whose value Validate rejects.
type FieldError = fielderr.FieldError

// Validate checks c and returns a *FieldError for the first field that
// is wrong: Mode one of the three models, FailNth at least 0, FailRate a
// probability. The mutant is checked last (ValidateMutant): a command
// that only lists the mutants has no use for it.
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Mode < 0 || int(c.Mode) >= len(modeNames):
		return bad("Mode", " %v: want eager, ondemand or async", c.Mode)
	case c.FailNth < 0:
		return bad("FailNth", " %d: want 0 (never) or a positive allocation number", c.FailNth)
	case !(c.FailRate >= 0 && c.FailRate <= 1):
		return bad("FailRate", " %v: want a probability in 0..1", c.FailRate)
	}
	return c.ValidateMutant()
}

// ValidateMutant checks that c.Mutant is "" or a catalogued mutant of
// c.Mode (NewKernel refuses any other).
func (c *Config) ValidateMutant() error {
	if c.Mutant == "" {
		return nil
	}
	m, ok := LookupMutant(c.Mutant)
	if !ok {
		return &FieldError{Field: "Mutant", Msg: fmt.Sprintf(" %q: unknown mutant", c.Mutant)}
	}
	if m.Mode != c.Mode {
		return &FieldError{Field: "Mutant", Msg: fmt.Sprintf(" %q applies to the %v model, not %v", m.Name, m.Mode, c.Mode)}
	}
	return nil
}
