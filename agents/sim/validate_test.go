package sim

import (
	"errors"
	"math"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
		msg   string
	}{
		{"default", func(*Config) {}, "", ""},
		{"async mutant", func(c *Config) { c.Mode, c.Mutant = Async, "async-rollback-partial" }, "", ""},
		{"failures", func(c *Config) { c.FailNth, c.FailRate = 3, 1 }, "", ""},
		{"mode", func(c *Config) { c.Mode = 7 }, "Mode", "Mode mode(7): want eager, ondemand or async"},
		{"negative mode", func(c *Config) { c.Mode = -1 }, "Mode", ""},
		{"fail nth", func(c *Config) { c.FailNth = -1 }, "FailNth", "FailNth -1: want 0 (never) or a positive allocation number"},
		{"fail rate", func(c *Config) { c.FailRate = 1.5 }, "FailRate", "FailRate 1.5: want a probability in 0..1"},
		{"fail rate NaN", func(c *Config) { c.FailRate = math.NaN() }, "FailRate", "FailRate NaN: want a probability in 0..1"},
		{"mutant", func(c *Config) { c.Mutant = "nope" }, "Mutant", `Mutant "nope": unknown mutant`},
		{"mutant of another model", func(c *Config) { c.Mutant = "async-rollback-partial" }, "Mutant",
			`Mutant "async-rollback-partial" applies to the async model, not eager`},
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
		if !errors.As(err, &fe) || fe.Field != c.field || c.msg != "" && err.Error() != c.msg {
			t.Errorf("%s: %v, want %q (field %s)", c.name, err, c.msg, c.field)
		}
	}
}
