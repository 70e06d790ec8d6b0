package campaign

import (
	"fmt"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/fielderr"
)

// The defaults of a campaign's Config: Run takes a zero MinimizeRuns,
// MaxHarnessErrors, ProgressEvery or CensusEvery as these.
const (
	DefaultMinimizeRuns     = 300
	DefaultMaxHarnessErrors = 5
	DefaultProgressEvery    = time.Second
)

// FieldError is a Config field whose value Validate rejects.
type FieldError = fielderr.FieldError

// Validate checks the bounds and counts of c and returns a *FieldError
// for the first that is wrong: none may be negative (0 is no bound, or
// the default); NoStates must be able to take effect (a blind campaign
// ignores memory states already, and without coverage they are the only
// signal). The target is Run's to check (a command line validates its
// flags before it opens, or boots, the target).
func (c *Config) Validate() error {
	for _, f := range []struct {
		field string
		neg   bool
		val   any
	}{
		{"Duration", c.Duration < 0, c.Duration},
		{"Programs", c.Programs < 0, c.Programs},
		{"MinimizeRuns", c.MinimizeRuns < 0, c.MinimizeRuns},
		{"MinimizeTime", c.MinimizeTime < 0, c.MinimizeTime},
		{"MaxHarnessErrors", c.MaxHarnessErrors < 0, c.MaxHarnessErrors},
		{"ProgressEvery", c.ProgressEvery < 0, c.ProgressEvery},
		{"StopAfterFindings", c.StopAfterFindings < 0, c.StopAfterFindings},
		{"CoverEvery", c.CoverEvery < 0, c.CoverEvery},
	} {
		if f.neg {
			return &FieldError{Field: f.field, Msg: fmt.Sprintf(" %v: want a number >= 0", f.val)}
		}
	}
	switch {
	case c.NoStates && c.Blind:
		return &FieldError{Field: "NoStates", Msg: ": a blind campaign ignores memory states already (memory states guide only a --guided campaign)"}
	case c.NoStates && c.NoCover:
		return &FieldError{Field: "NoStates", Msg: ": without coverage nothing would be left to guide by (a blind campaign is that)"}
	}
	return nil
}
