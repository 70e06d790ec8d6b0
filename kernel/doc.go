// Package kernel holds what forkfuzz needs from a kernel under test: the
// config fragment with the options its oracles rely on (forkfuzz.config),
// a builder that makes a small bzImage from any kernel tree (Build), a
// checker that says which oracles a kernel supports (Check), Debian's cloud
// kernel fetched and unpacked without installing it (FetchDebian), module
// dependency resolution for such kernels (ModuleIndex), and the initramfs
// writer the VM target boots its agent with (Initramfs). Console report
// parsing is in kernel/report.
package kernel
