package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/kernel"
)

func init() {
	commands = append(commands,
		command{name: "kernel", args: "build|check|module ...", help: "build a kernel for forkfuzz, or check which oracles a kernel supports", run: cmdKernel},
		command{name: "vm-agent", help: "guest agent: init of forkfuzz's VMs (started by the kernel)", run: cmdVMAgent, hidden: true},
	)
	subcommands["kernel"] = []command{
		{name: "build", args: "[flags]", help: "build a small kernel with what forkfuzz needs (Debian's source by default)", run: cmdKernelBuild},
		{name: "check", args: "IMAGE-or-.config", help: "say which oracles a kernel image (or its .config) supports", run: cmdKernelCheck},
		{name: "module", args: "--tree DIR [flags]", help: "build the forkfuzz_pmd module against a prepared kernel tree", run: cmdKernelModule},
	}
	targetKinds["qemu"] = targetKind{help: "QEMU VMs booting the kernel under test", flags: qemuFlags,
		replay: []string{"kernel", "target-file", "kernel-cmdline", "modules", "vm-memory", "vm-cpus", "program-timeout"},
		paths:  []string{"kernel", "target-file", "modules"}}
}

// qemuFlag names the flag of each vm.Config field a flag sets.
var qemuFlag = map[string]string{"VMs": "vms", "Memory": "vm-memory", "CPUs": "vm-cpus", "Accel": "accel",
	"Workdir": "vm-workdir", "BootTimeout": "boot-timeout", "ProgramTimeout": "program-timeout", "Cmdline": "kernel-cmdline",
	"NoSnapshot": "no-vm-snapshot"}

func qemuFlags(fs *flag.FlagSet) func() (agents.Target, error) {
	def := vm.DefaultConfig()
	image := fs.String("kernel", "", "qemu: kernel image to boot (default: the target file's, else Debian's "+kernel.DefaultImagePackage+", fetched and unpacked, not installed)")
	vms := fs.Int("vms", def.VMs, "qemu: number of VMs")
	targetFile := fs.String("target-file", "", "qemu: target file with guest set-up and fork-mode steps")
	accel := fs.String("accel", def.Accel, "qemu: auto (KVM if it boots the kernel, else TCG), kvm or tcg")
	mem := fs.Int("vm-memory", 0, fmt.Sprintf("qemu: MiB per VM (default %d, or the target file's)", vm.DefaultMemory))
	cpus := fs.Int("vm-cpus", 0, fmt.Sprintf("qemu: vCPUs per VM (default %d, or the target file's)", vm.DefaultCPUs))
	vmdir := fs.String("vm-workdir", "", "qemu: where VM consoles are kept (default: a temporary directory)")
	bootTimeout := fs.Duration("boot-timeout", def.BootTimeout, "qemu: how long a VM may take to boot")
	progTimeout := fs.Duration("program-timeout", def.ProgramTimeout, "qemu: how long one program may run in the guest")
	cmdline := fs.String("kernel-cmdline", "", "qemu: words appended to the guest kernel's command line (besides the target file's cmdline), e.g. "+kernel.MutantsParam+"=wp-src-pmd")
	extraMods := fs.String("modules", "", "qemu: comma-separated .ko files the guest loads at boot (default: "+kernel.PMDModuleName+" if it is beside --kernel)")
	noSnap := fs.Bool("no-vm-snapshot", false, "qemu: boot every VM cold (by default the state right after boot is saved once per kernel and loaded for restarts, further VMs and later runs)")
	positive(fs, "vms", "boot-timeout", "program-timeout")
	return func() (agents.Target, error) {
		cfg := vm.Config{VMs: *vms, Accel: *accel, Memory: *mem, CPUs: *cpus, Workdir: *vmdir,
			BootTimeout: *bootTimeout, ProgramTimeout: *progTimeout, Log: os.Stderr, Cmdline: *cmdline, NoSnapshot: *noSnap}
		if err := cfg.Validate(); err != nil {
			return nil, flagError(err, qemuFlag)
		}
		if err := qemuKernel(&cfg, *targetFile, *image, *extraMods); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "qemu: booting %d VM(s) with %s\n", cfg.VMs, cfg.Kernel)
		return vm.New(cfg)
	}
}

// qemuKernel sets cfg's target file, kernel image and modules: --kernel,
// else the target file's, else Debian's (fetched, with the virtio
// modules it needs); then --modules.
func qemuKernel(cfg *vm.Config, targetFile, image, extraMods string) error {
	if targetFile != "" {
		tf, err := vm.ReadTargetFile(targetFile)
		if err != nil {
			return err
		}
		cfg.TargetFile = tf
		if image == "" {
			image = tf.Kernel
		}
	}
	if image == "" {
		d, err := kernel.FetchDebian(kernel.DefaultImagePackage, kernel.CacheDir(), os.Stderr)
		if err != nil {
			return err
		}
		idx, err := kernel.IndexModules(d.Modules)
		if err != nil {
			return err
		}
		mods, err := idx.Resolve(kernel.VirtioModules...)
		if err != nil {
			return err
		}
		cfg.Kernel, cfg.Modules = d.Image, mods
	} else {
		cfg.Kernel = image
	}
	cfg.Modules = append(cfg.Modules, extraModules(extraMods, cfg.Kernel)...)
	if fi, err := os.Stat(cfg.Kernel); err != nil {
		return fmt.Errorf("kernel image: %w", err)
	} else if fi.IsDir() {
		return fmt.Errorf("kernel image %s is a directory", cfg.Kernel)
	}
	return nil
}

func cmdVMAgent(args []string, stdout, stderr io.Writer) int {
	err := vm.AgentMain(args)
	fmt.Fprintln(stderr, "forkfuzz vm-agent:", err)
	return exitError
}

func cmdKernel(args []string, stdout, stderr io.Writer) int {
	return runSub("kernel", args, stdout, stderr)
}

func cmdKernelBuild(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("kernel build", stderr)
	src := fs.String("src", "", "kernel source tree (default: Debian's "+kernel.DefaultSourcePackage+", fetched and unpacked)")
	out := fs.String("out", "", "build directory (default: DIR/forkfuzz-build inside the tree)")
	jobs := fs.Int("j", 0, "parallel jobs (default: number of CPUs)")
	configOnly := fs.Bool("config-only", false, "write the .config and stop")
	mutants := fs.Bool("mutants", false, "plant the kernel mutation benchmark (kernel/mutants: bugs switched on by the boot parameter "+kernel.MutantsParam+"=NAME; see forkfuzz bench mutants)")
	debugInfo := fs.Bool("debug-info", false, "build with DWARF line tables and keep the vmlinux beside the image (forkfuzz cover --vmlinux reports covered source lines); slower, and a vmlinux of several hundred MB")
	var patches stringList
	fs.Var(&patches, "patch", "apply this patch (patch -p1) before building; repeat for a series, applied in the order given (default tree: a copy of its own per series)")
	config := fs.String("config", "", "start from this full .config instead of defconfig plus forkfuzz's fragment (olddefconfig fills in the rest; options the tree drops are said)")
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	res, err := kernel.Build(kernel.BuildOptions{Src: *src, Out: *out, Jobs: *jobs, ConfigOnly: *configOnly, Mutants: *mutants, DebugInfo: *debugInfo,
		Patches: patches, Config: *config, Log: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz kernel build:", err)
		return exitError
	}
	fmt.Fprintf(stdout, "config: %s\n", res.Config)
	if res.Image != "" {
		fmt.Fprintf(stdout, "image:  %s (built in %v)\n", res.Image, res.Elapsed.Round(time.Second))
		if res.Vmlinux != "" {
			fmt.Fprintf(stdout, "vmlinux: %s (line tables: forkfuzz cover --vmlinux)\n", res.Vmlinux)
		}
		if res.PMDModule != "" {
			fmt.Fprintf(stdout, "module: %s\n", res.PMDModule)
		} else if res.ModuleErr != nil {
			fmt.Fprintf(stdout, "module: none: %v\n", res.ModuleErr)
		}
	}
	return exitClean
}

func cmdKernelCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("kernel check", stderr)
	if err := parseArgs(fs, args, "IMAGE-or-.config"); err != nil {
		return parseExit(err)
	}
	rep, err := kernel.Check(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz kernel check:", err)
		return exitError
	}
	fmt.Fprint(stdout, rep.String())
	if !rep.OK() {
		return exitFindings
	}
	return exitClean
}
