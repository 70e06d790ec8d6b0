package campaign

import (
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		field string // "" when valid
		msg   string
	}{
		{"zero", Config{}, "", ""},
		{"bounded", Config{Duration: time.Minute, Programs: 10, MinimizeRuns: 300, MinimizeTime: time.Minute,
			MaxHarnessErrors: 5, ProgressEvery: time.Second, StopAfterFindings: 1, CensusEvery: -1}, "", ""},
		{"blind", Config{Blind: true}, "", ""},
		{"duration", Config{Duration: -time.Second}, "Duration", "Duration -1s: want a number >= 0"},
		{"programs", Config{Programs: -1}, "Programs", "Programs -1: want a number >= 0"},
		{"minimize runs", Config{MinimizeRuns: -1}, "MinimizeRuns", "MinimizeRuns -1: want a number >= 0"},
		{"minimize time", Config{MinimizeTime: -time.Second}, "MinimizeTime", "MinimizeTime -1s: want a number >= 0"},
		{"harness errors", Config{MaxHarnessErrors: -1}, "MaxHarnessErrors", "MaxHarnessErrors -1: want a number >= 0"},
		{"progress", Config{ProgressEvery: -time.Second}, "ProgressEvery", "ProgressEvery -1s: want a number >= 0"},
		{"stop after", Config{StopAfterFindings: -1}, "StopAfterFindings", "StopAfterFindings -1: want a number >= 0"},
		{"cover every", Config{CoverEvery: -2}, "CoverEvery", "CoverEvery -2: want a number >= 0"},
		{"cover every, blind", Config{CoverEvery: 3, Blind: true}, "", ""},
		{"blind without cover", Config{Blind: true, NoCover: true}, "", ""},
		{"no states", Config{NoStates: true}, "", ""},
		{"no states, blind", Config{NoStates: true, Blind: true}, "NoStates", "NoStates: a blind campaign ignores memory states already (memory states guide only a --guided campaign)"},
		{"no states, no cover", Config{NoStates: true, NoCover: true}, "NoStates", ""},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
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
