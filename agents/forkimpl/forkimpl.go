// Package forkimpl holds the fork-implementation profiles: how each
// fork implementation other than the kernel's stock fork (Async-fork,
// On-demand-fork, ...) is switched on for one process. The executor
// applies them (agents/executor); C reproducers (campaign/reproc) emit the
// same steps. A profile is data: the knob whose presence says the kernel
// has the implementation, and the steps that switch it on.
package forkimpl

import (
	"fmt"
	"strings"
)

// CgroupRoot is where the cgroup v2 hierarchy is mounted.
const CgroupRoot = "/sys/fs/cgroup"

// Profile describes how one fork implementation is switched on.
type Profile struct {
	Name string
	Doc  string
	// Knob is the file whose presence says the kernel has the
	// implementation ("" for stock).
	Knob  string
	Steps []Step
}

// Step is one action of a profile, made by the executor process.
type Step struct {
	// Kind: "memcg" (write Value to file Path of the executor's own
	// memory cgroup, created for it under the cgroup it was started in,
	// and read it back), "write" (write Value to Path; /proc/self is the
	// executor), "prctl" (prctl(Args...) in the executor; its threads
	// share it).
	Kind  string
	Path  string
	Value string
	Args  []uintptr
	// IfPresent: skip the step where Path does not exist (stock uses it to
	// switch off whatever knob the kernel has).
	IfPresent bool
}

// Profiles are the known profiles. Vendor knobs other than
// Alibaba's are described from their public documentation and have not
// been tried on a real kernel here; the prctl of On-demand-fork (65) is
// deliberately absent: 65 is PR_SET_MDWE on mainline since 6.3.
var Profiles = []Profile{
	{Name: "stock", Doc: "the kernel's stock fork; any fork-implementation knob the kernel has is switched off for the executor",
		Steps: []Step{
			{Kind: "memcg", Path: "memory.async_fork", Value: "0", IfPresent: true},
			{Kind: "write", Path: "/proc/self/use_odf", Value: "0", IfPresent: true},
		}},
	{Name: "async-fork", Doc: "Alibaba's Async-fork (Anolis/Alibaba Cloud Linux, mm/async_fork.c): cgroup v2 memory.async_fork=1 on the executor's own memory cgroup",
		Knob:  CgroupRoot + "/memory.async_fork",
		Steps: []Step{{Kind: "memcg", Path: "memory.async_fork", Value: "1"}}},
	{Name: "bytedance-async-fork", Doc: "ByteDance's Async-fork: sysctl kernel.async_fork_enabled=1, then prctl(0x4000, 1) in the executor",
		Knob: "/proc/sys/kernel/async_fork_enabled",
		Steps: []Step{
			{Kind: "write", Path: "/proc/sys/kernel/async_fork_enabled", Value: "1"},
			{Kind: "prctl", Args: []uintptr{0x4000, 1}},
		}},
	{Name: "odf", Doc: "On-demand-fork (shared PTE tables): /proc/PID/use_odf=1 for the executor",
		Knob:  "/proc/self/use_odf",
		Steps: []Step{{Kind: "write", Path: "/proc/self/use_odf", Value: "1"}}},
}

// Names lists the profile names.
func Names() []string {
	var n []string
	for _, p := range Profiles {
		n = append(n, p.Name)
	}
	return n
}

// Lookup returns the named profile.
func Lookup(name string) (*Profile, error) {
	for i := range Profiles {
		if Profiles[i].Name == name {
			return &Profiles[i], nil
		}
	}
	return nil, fmt.Errorf("unknown fork implementation %q (want one of %s)", name, strings.Join(Names(), ", "))
}
