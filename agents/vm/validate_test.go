package vm

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
		msg   string
	}{
		{"default", func(*Config) {}, "", ""},
		{"sized", func(c *Config) { c.VMs, c.Memory, c.CPUs, c.NUMANodes = 4, 2048, 4, 1 }, "", ""},
		{"kvm", func(c *Config) { c.Accel = "kvm" }, "", ""},
		{"tcg", func(c *Config) { c.Accel = "tcg" }, "", ""},
		{"accel unset", func(c *Config) { c.Accel = "" }, "", ""},
		{"hang and grace set", func(c *Config) { c.HangTimeout, c.CrashGrace = time.Minute, time.Second }, "", ""},
		{"no VM", func(c *Config) { c.VMs = 0 }, "VMs", "VMs 0: want at least 1"},
		{"memory", func(c *Config) { c.Memory = -1 }, "Memory", "Memory -1: want a positive number of MiB"},
		{"cpus", func(c *Config) { c.CPUs = -2 }, "CPUs", "CPUs -2: want a positive number"},
		{"numa", func(c *Config) { c.NUMANodes = -1 }, "NUMANodes", "NUMANodes -1: want a positive number"},
		{"boot timeout", func(c *Config) { c.BootTimeout = 0 }, "BootTimeout", "BootTimeout 0s: want a positive duration"},
		{"program timeout", func(c *Config) { c.ProgramTimeout = -time.Second }, "ProgramTimeout", "ProgramTimeout -1s: want a positive duration"},
		{"hang timeout", func(c *Config) { c.HangTimeout = -time.Second }, "HangTimeout", "HangTimeout -1s: want a positive duration"},
		{"crash grace", func(c *Config) { c.CrashGrace = -time.Second }, "CrashGrace", "CrashGrace -1s: want a positive duration"},
		{"accel", func(c *Config) { c.Accel = "hvf" }, "Accel", `Accel "hvf": want auto, kvm or tcg`},
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
		if !errors.As(err, &fe) || fe.Field != c.field || err.Error() != c.msg {
			t.Errorf("%s: %v, want %q (field %s)", c.name, err, c.msg, c.field)
		}
	}
}

// fillDefaults: a zero Config gets every Default*, a target file's sizes
// win over them, given values stay.
func TestFillDefaults(t *testing.T) {
	var c Config
	c.fillDefaults()
	want := Config{VMs: DefaultVMs, Memory: DefaultMemory, CPUs: DefaultCPUs, NUMANodes: DefaultNUMANodes, BootTimeout: DefaultBootTimeout,
		ProgramTimeout: DefaultProgramTimeout, HangTimeout: DefaultHangTimeout, CrashGrace: DefaultCrashGrace, QEMU: DefaultQEMU}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("zero config filled as %+v, want %+v", c, want)
	}
	c = Config{VMs: 3, Memory: 512, Cmdline: "a", TargetFile: &TargetFile{Memory: 2048, CPUs: 4, Cmdline: "b"}}
	c.fillDefaults()
	if c.VMs != 3 || c.Memory != 2048 || c.CPUs != 4 || c.Cmdline != "a b" || c.NUMANodes != DefaultNUMANodes {
		t.Errorf("filled %+v", c)
	}
}
