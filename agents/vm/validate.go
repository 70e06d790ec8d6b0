package vm

import (
	"fmt"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/internal/fielderr"
)

// The defaults of a VM pool's Config. New fills a zero field with its
// default; a command line starts from DefaultConfig, where the pool size
// and the timeouts are set and must stay positive (Validate).
const (
	DefaultVMs            = 1
	DefaultMemory         = 1024 // MiB per VM
	DefaultCPUs           = 2
	DefaultNUMANodes      = 2
	DefaultAccel          = "auto"
	DefaultBootTimeout    = 5 * time.Minute
	DefaultProgramTimeout = 60 * time.Second
	DefaultHangTimeout    = 60 * time.Second
	DefaultCrashGrace     = 5 * time.Second
	DefaultQEMU           = "qemu-system-x86_64"
)

// fillDefaults gives every zero field of c its default (the Default*
// constants), after the target file's memory, CPUs, NUMA nodes and
// command line.
func (c *Config) fillDefaults() {
	orInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	orDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	orInt(&c.VMs, DefaultVMs)
	orInt(&c.Memory, DefaultMemory)
	orInt(&c.CPUs, DefaultCPUs)
	orInt(&c.NUMANodes, DefaultNUMANodes)
	if tf := c.TargetFile; tf != nil {
		if tf.Memory > 0 {
			c.Memory = tf.Memory
		}
		if tf.CPUs > 0 {
			c.CPUs = tf.CPUs
		}
		if tf.NUMANodes > 0 {
			c.NUMANodes = tf.NUMANodes
		}
		if tf.Cmdline != "" {
			c.Cmdline = strings.TrimSpace(c.Cmdline + " " + tf.Cmdline)
		}
	}
	orDur(&c.BootTimeout, DefaultBootTimeout)
	orDur(&c.ProgramTimeout, DefaultProgramTimeout)
	orDur(&c.HangTimeout, DefaultHangTimeout)
	orDur(&c.CrashGrace, DefaultCrashGrace)
	if c.QEMU == "" {
		c.QEMU = DefaultQEMU
	}
}

// DefaultConfig is the Config of a command line before its flags: one
// VM, automatic acceleration, the default timeouts; Memory and CPUs are
// 0 (the target file's, else DefaultMemory and DefaultCPUs). The caller
// adds the kernel.
func DefaultConfig() Config {
	return Config{VMs: DefaultVMs, Accel: DefaultAccel, BootTimeout: DefaultBootTimeout, ProgramTimeout: DefaultProgramTimeout}
}

// FieldError is a Config field whose value Validate rejects.
type FieldError = fielderr.FieldError

// Validate checks the sizes, timeouts and acceleration of c, and returns
// a *FieldError for the first that is wrong: VMs, BootTimeout and
// ProgramTimeout must be positive (as in DefaultConfig), Memory, CPUs,
// NUMANodes, HangTimeout and CrashGrace at least 0 (0: the default), and
// Accel "auto", "kvm", "tcg" or "" (auto). The kernel image is New's to
// check (a command line may fetch it after validating its flags).
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.VMs < 1:
		return bad("VMs", " %d: want at least 1", c.VMs)
	case c.Memory < 0:
		return bad("Memory", " %d: want a positive number of MiB", c.Memory)
	case c.CPUs < 0:
		return bad("CPUs", " %d: want a positive number", c.CPUs)
	case c.NUMANodes < 0:
		return bad("NUMANodes", " %d: want a positive number", c.NUMANodes)
	case c.BootTimeout <= 0:
		return bad("BootTimeout", " %v: want a positive duration", c.BootTimeout)
	case c.ProgramTimeout <= 0:
		return bad("ProgramTimeout", " %v: want a positive duration", c.ProgramTimeout)
	case c.HangTimeout < 0:
		return bad("HangTimeout", " %v: want a positive duration", c.HangTimeout)
	case c.CrashGrace < 0:
		return bad("CrashGrace", " %v: want a positive duration", c.CrashGrace)
	}
	switch c.Accel {
	case "", "auto", "kvm", "tcg":
	default:
		return bad("Accel", " %q: want auto, kvm or tcg", c.Accel)
	}
	return nil
}
