package gate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
		msg   string
	}{
		{"default", func(*Config) {}, "", ""},
		{"shortest budget", func(c *Config) { c.Budget = MinBudget }, "", ""},
		{"no minimum of programs", func(c *Config) { c.MinPrograms = 0 }, "", ""},
		{"no flake tolerated", func(c *Config) { c.MaxHarnessFlakes = 0 }, "", ""},
		{"zero budget", func(c *Config) { c.Budget = 0 }, "Budget", "Budget must be positive, got 0s"},
		{"negative budget", func(c *Config) { c.Budget = -time.Second }, "Budget", "Budget must be positive, got -1s"},
		{"short budget", func(c *Config) { c.Budget = time.Second }, "Budget", "Budget 1s is too short for a gate (at least 5s)"},
		{"min programs", func(c *Config) { c.MinPrograms = -1 }, "MinPrograms", "MinPrograms must be >= 0, got -1"},
		{"flakes", func(c *Config) { c.MaxHarnessFlakes = -1 }, "MaxHarnessFlakes", "MaxHarnessFlakes must be >= 0, got -1"},
		{"baseline replays", func(c *Config) { c.BaselineReplays = 0 }, "BaselineReplays", "BaselineReplays must be >= 1, got 0"},
		{"minimize runs", func(c *Config) { c.MinimizeRuns = 0 }, "MinimizeRuns", "MinimizeRuns must be >= 1, got 0"},
		{"profile", func(c *Config) { c.Profile = "nope" }, "Profile", `Profile: unknown profile "nope"`},
		{"no profile", func(c *Config) { c.Profile = "" }, "Profile", `Profile: unknown profile ""`},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", c.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("%s: %v, want a %s error starting %q", c.name, err, c.field, c.msg)
		}
	}
}
