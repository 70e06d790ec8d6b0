package obs

// Coverage is the kernel code a program's processes ran, from KCOV
// (agents/executor/kcov.go): the main process's executor thread around
// every operation, and the first children, each on its own.
type Coverage struct {
	// Unavailable says why there is no coverage (e.g. "no KCOV (open
	// /sys/kernel/debug/kcov: no such file or directory)"); empty when
	// PCs and Edges are set.
	Unavailable string `json:"unavailable,omitempty"`
	// PCs are the distinct kernel PCs (KCOV_TRACE_PC), sorted.
	PCs []uint64 `json:"pcs,omitempty"`
	// Edges are the distinct hashed pairs of consecutive PCs of one
	// process (32-bit hashes, sorted): the signal that decides whether a
	// program reached something new.
	Edges []uint32 `json:"edges,omitempty"`
	// Procs is how many processes were covered (the main one and children).
	Procs int `json:"procs,omitempty"`
	// Threads is how many of the main process's threads t1..tN were
	// covered (each collects on a kcov descriptor of its own).
	Threads int `json:"threads,omitempty"`
	// Overflow is set when a buffer or set filled up: some coverage is missing.
	Overflow bool `json:"overflow,omitempty"`
	// Symbols, when asked for, are the kernel's text symbols as
	// /proc/kallsyms lists them ("ADDR t NAME" lines, types t and T only).
	Symbols string `json:"symbols,omitempty"`
	// Note says where it overflowed.
	Note string `json:"note,omitempty"`
}

// Available reports whether c holds coverage.
func (c *Coverage) Available() bool { return c != nil && c.Unavailable == "" }
