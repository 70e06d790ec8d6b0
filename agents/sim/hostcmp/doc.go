// Package hostcmp holds the cross-check of the simulated kernel against the
// host kernel: generated programs run on the real executor and on the
// simulated eager fork must give the same observations (Compare), modulo
// pids, timing, inode numbers and the addresses the kernel picks itself.
package hostcmp
