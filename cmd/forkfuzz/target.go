package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// targetSel is a command's --target and the flags of every target kind,
// registered on one flag set. After parsing, check rejects flags of
// another kind than the chosen one, Open opens the target, and
// ReplayArgs/Kernel say how to reopen it and which kernel it runs.
type targetSel struct {
	fs      *flag.FlagSet
	name    *string
	names   []string
	owner   map[string]string // flag name -> target kind
	openers map[string]func() (agents.Target, error)
	// wrap applies --fork-impl/--differential (forkimpl.go) to every kind.
	wrap func(agents.Target, error) (agents.Target, error)
}

// targetSetup adds --target (default def) and every kind's flags to fs.
func targetSetup(fs *flag.FlagSet, def string) *targetSel {
	s := &targetSel{fs: fs, owner: map[string]string{}, openers: map[string]func() (agents.Target, error){}}
	for n := range targetKinds {
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	var help []string
	for _, n := range s.names {
		help = append(help, n+" ("+targetKinds[n].help+")")
	}
	s.name = fs.String("target", def, "where programs run: "+strings.Join(help, ", "))
	for _, n := range s.names {
		before := map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
		s.openers[n] = targetKinds[n].flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !before[f.Name] {
				s.owner[f.Name] = n
			}
		})
	}
	s.wrap = forkImplFlags(fs)
	return s
}

// Kind is the chosen --target.
func (s *targetSel) Kind() string { return *s.name }

// check reports an unknown --target or a flag of another target kind.
func (s *targetSel) check() error {
	if _, ok := s.openers[*s.name]; !ok {
		return fmt.Errorf("unknown target %q (want one of %s)", *s.name, strings.Join(s.names, ", "))
	}
	var err error
	s.fs.Visit(func(f *flag.Flag) {
		if k, ok := s.owner[f.Name]; ok && k != *s.name && err == nil {
			err = fmt.Errorf("--%s is a flag of --target %s, not of --target %s", f.Name, k, *s.name)
		}
	})
	return err
}

// wrongKind names the flags set on the command line that belong to
// another target kind than the chosen one, "--kernel (qemu)", in flag
// name order.
func (s *targetSel) wrongKind() []string {
	var wrong []string
	s.fs.Visit(func(f *flag.Flag) {
		if k, ok := s.owner[f.Name]; ok && k != *s.name {
			wrong = append(wrong, "--"+f.Name+" ("+k+")")
		}
	})
	return wrong
}

// kindArgs are the flags of the chosen kind set on the command line (but
// --list-mutants), as --name value pairs: what opens a second target
// alike (the ci gate's baseline, with its kernel or model replaced).
func (s *targetSel) kindArgs() []string {
	var args []string
	s.fs.Visit(func(f *flag.Flag) {
		if s.owner[f.Name] == *s.name && f.Name != "list-mutants" {
			args = append(args, "--"+f.Name, f.Value.String())
		}
	})
	return args
}

// Open checks the selection and opens the target.
func (s *targetSel) Open() (agents.Target, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.wrap(s.openers[*s.name]())
}

// checkCorrupt rejects an unknown --corrupt, or one on a target without an
// executor, before anything runs.
func (s *targetSel) checkCorrupt(name string) error {
	return checkCorrupt(*s.name, name)
}

// checkCorrupt rejects --corrupt name for target kind.
func checkCorrupt(kind, name string) error {
	if name == "" {
		return nil
	}
	_, ok := executor.Corruptions[name]
	if _, rb := executor.RollbackCorruptions[name]; rb {
		ok = true
	}
	if !ok {
		var known []string
		known = append(known, executor.CorruptionNames()...)
		for n := range executor.RollbackCorruptions {
			known = append(known, n)
		}
		sort.Strings(known)
		return fmt.Errorf("--corrupt: unknown corruption %q (known: %s)", name, strings.Join(known, ", "))
	}
	if kind == "sim" {
		return errors.New("--corrupt falsifies the executor's observations; --target sim has no executor (use --mutant)")
	}
	return nil
}

// checkAll is check and checkCorrupt.
func (s *targetSel) checkAll(corrupt string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.checkCorrupt(corrupt)
}

// ReplayArgs are the flags that reopen t as it was opened: --target and
// the flags of its kind that change what a program does (not the ones
// that only change how fast or where logs go), paths made absolute, and
// for a VM target the image it booted (Kernel gives its sha256).
func (s *targetSel) ReplayArgs(t agents.Target) []string {
	img, isImage := agents.KernelImageOf(agents.Unwrap(t))
	args := s.kindReplay(isImage)
	if isImage && (s.flagValue("kernel") != "" || s.flagValue("target-file") != "") {
		// (Without either, the default image replays as the default: a
		// --kernel naming it would lose the modules fetched with it.)
		p := img.KernelImage()
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		args = append(args, "--kernel", p)
	}
	return append(args, forkImplReplay(s.fs)...)
}

// replayFlags are ReplayArgs before the target is opened: --kernel as
// given (the ci gate names its kernels by image instead).
func (s *targetSel) replayFlags() []string {
	return append(s.kindReplay(false), forkImplReplay(s.fs)...)
}

// kindReplay is --target and the replay flags of its kind set on the
// command line, without --kernel if skipKernel.
func (s *targetSel) kindReplay(skipKernel bool) []string {
	kind := targetKinds[*s.name]
	args := []string{"--target", *s.name}
	s.fs.Visit(func(f *flag.Flag) {
		if s.owner[f.Name] != *s.name || !contains(kind.replay, f.Name) || skipKernel && f.Name == "kernel" {
			return
		}
		args = append(args, "--"+f.Name, replayValue(kind, f))
	})
	return args
}

// replayValue is flag f's value for a replay command: the paths of kind's
// path flags made absolute (the command runs in the finding directory).
func replayValue(kind targetKind, f *flag.Flag) string {
	v := f.Value.String()
	if !contains(kind.paths, f.Name) {
		return v
	}
	var abs []string
	for _, p := range strings.Split(v, ",") {
		if a, err := filepath.Abs(p); err == nil && p != "" {
			p = a
		}
		abs = append(abs, p)
	}
	return strings.Join(abs, ",")
}

// forkImplReplay is --fork-impl (and --differential) as set on fs: the
// fork implementation is part of what the kernel did, and a replay
// without it would fork the stock way and pass.
func forkImplReplay(fs *flag.FlagSet) []string {
	f := fs.Lookup("fork-impl")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	args := []string{"--fork-impl", f.Value.String()}
	if d := fs.Lookup("differential"); d != nil && d.Value.String() == "true" {
		args = append(args, "--differential")
	}
	return args
}

// flagValue is the value of flag name, "" if there is none.
func (s *targetSel) flagValue(name string) string {
	if f := s.fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// Kernel identifies the kernel t runs programs on.
func (s *targetSel) Kernel(t agents.Target) campaign.KernelID {
	t = agents.Unwrap(t)
	if img, ok := agents.KernelImageOf(t); ok {
		k := campaign.KernelID{Image: img.KernelImage(), Uname: img.KernelRelease()}
		if a, err := filepath.Abs(k.Image); err == nil {
			k.Image = a
		}
		k.SHA256, _ = kernel.FileSHA256(k.Image)
		return k
	}
	if *s.name == "native" {
		return campaign.HostKernel()
	}
	return campaign.KernelID{Simulated: t.Name()}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// isTerminal reports whether w is a terminal (the progress line may then
// be rewritten in place with a carriage return).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
