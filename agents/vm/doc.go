// Package vm runs forkfuzz programs in QEMU VMs booted with the kernel
// under test: the guest agent (AgentMain, PID 1 of the VM's initramfs), the
// host<->guest wire protocol over a virtio-serial port (wire.go), the pool
// of VMs that implements agents.Target (Target), and target files with
// guest set-up and fork-mode steps (TargetFile).
//
// # Who is at fault
//
// Target.Run returns an observation, or an event of the run, or a harness
// error:
//   - *KernelReportError: the kernel printed a report on the console
//     (parsed by kernel/report), the VM stopped making progress (no
//     heartbeat within Config.HangTimeout), or the guest went down without
//     a report. A finding. It may come with the program's observation when
//     the program completed (a WARNING).
//   - *executor.CrashError: the guest's executor process died or hung. A
//     finding, as on the host.
//   - anything else (*BootError, QEMU would not start or was killed from
//     outside, a failed fork-mode step, a full disk): a harness error, never
//     a finding.
//
// # Guest
//
// The kernel runs "/forkfuzz vm-agent" as init. PID 1 mounts the pseudo
// file systems and runs the agent proper as a child, restarting it if it
// dies, and reaps orphans; it never exits. The agent loads the modules
// listed in its configuration (AgentConfigPath), finds its port under
// /sys/class/virtio-ports by name, runs the set-up steps, says hello,
// sends a heartbeat every second, and runs each program it receives in an
// executor child process (executor.Remote), so an executor crash never
// takes the agent down.
//
// # Host
//
// Each VM is one QEMU process (TCG, or KVM where a probe boot shows it
// works); its serial console is captured through a pipe into a log file and
// an in-memory ring, and a program's part of it is parsed when its result
// arrives (after making sure every console byte QEMU wrote before the
// result has been read). An instance is used by one Run at a time; the
// pool hands idle instances out through a channel.
package vm
