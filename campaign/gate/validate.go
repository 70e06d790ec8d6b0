package gate

import (
	"fmt"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/internal/fielderr"
)

// The defaults of a gate's Config (DefaultConfig): what `forkfuzz ci`
// runs without flags.
const (
	DefaultBudget           = 30 * time.Minute
	DefaultProfile          = "default"
	DefaultWorkdir          = "forkfuzz-ci"
	DefaultMinPrograms      = 1
	DefaultMinFuzzPrograms  = 1
	DefaultBaselineReplays  = 3
	DefaultMinimizeRuns     = 300
	DefaultMaxHarnessFlakes = 1
	// MinBudget is the shortest budget a gate takes: booting, the
	// corpus and the reporting reserve need a few seconds.
	MinBudget = 5 * time.Second
)

// DefaultFixRuns is how often a --fixes reproducer runs on each kernel.
const DefaultFixRuns = 5

// DefaultConfig is a gate's Config with every value field at its default
// (the seed is 1: a gate is reproducible); the caller adds the target.
func DefaultConfig() Config {
	return Config{Budget: DefaultBudget, Seed: 1, Profile: DefaultProfile, Workdir: DefaultWorkdir,
		MinPrograms: DefaultMinPrograms, MinFuzzPrograms: DefaultMinFuzzPrograms, BaselineReplays: DefaultBaselineReplays,
		MinimizeRuns: DefaultMinimizeRuns, MaxHarnessFlakes: DefaultMaxHarnessFlakes, FixRuns: DefaultFixRuns}
}

// FieldError is a Config field whose value Validate rejects.
type FieldError = fielderr.FieldError

// Validate checks the value fields of c (Budget, Profile, MinPrograms,
// MinFuzzPrograms,
// BaselineReplays, MinimizeRuns, MaxHarnessFlakes), in that order, and
// returns a *FieldError for the first that is wrong. It does not check
// the target, the kernels or the files: the gate reports on those.
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Budget <= 0:
		return bad("Budget", " must be positive, got %v", c.Budget)
	case c.Budget < MinBudget:
		return bad("Budget", " %v is too short for a gate (at least %v)", c.Budget, MinBudget)
	case c.MinPrograms < 0:
		return bad("MinPrograms", " must be >= 0, got %d", c.MinPrograms)
	case c.MinFuzzPrograms < 0:
		return bad("MinFuzzPrograms", " must be >= 0, got %d", c.MinFuzzPrograms)
	case c.MaxHarnessFlakes < 0:
		return bad("MaxHarnessFlakes", " must be >= 0, got %d", c.MaxHarnessFlakes)
	case c.BaselineReplays < 1:
		return bad("BaselineReplays", " must be >= 1, got %d", c.BaselineReplays)
	case c.MinimizeRuns < 1:
		return bad("MinimizeRuns", " must be >= 1, got %d", c.MinimizeRuns)
	case c.FixRuns < 1:
		return bad("FixRuns", " must be >= 1, got %d", c.FixRuns)
	case c.CoverEvery < 0:
		return bad("CoverEvery", " must be >= 0, got %d", c.CoverEvery)
	}
	if _, err := gen.Profile(c.Profile); err != nil {
		return bad("Profile", ": %v", err)
	}
	return nil
}
