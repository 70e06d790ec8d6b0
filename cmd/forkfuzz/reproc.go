package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/campaign/reproc"
)

func init() {
	commands = append(commands, command{name: "repro-c", args: "[flags] PROG", help: "write a standalone C reproducer of a program to stdout", run: cmdReproC})
}

func cmdReproC(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("repro-c", stderr)
	kernel := releaseVar(fs, "kernel", "release (uname -r, e.g. 6.1.192 or 6.1.0-28-cloud-amd64) of the kernel the reproducer is for; the model follows it where Linux changed (default: the newest behaviour)")
	impl := fs.String("fork-impl", "", "fork-implementation profile the reproducer switches on for itself and its children (as --fork-impl does for the executor), checking per fork that it took effect: "+strings.Join(executor.ForkImplNames(), ", "))
	mutate := fs.String("mutate", "", "TEST ONLY: falsify the embedded expectation to show the checks bite (errno, word, state)")
	if err := parseArgs(fs, args, "PROG"); err != nil {
		return parseExit(err)
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz repro-c:", err)
		return exitError
	}
	sites, err := programSites(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz repro-c:", err)
		return exitError
	}
	opt := reproc.Options{Kernel: string(*kernel), ForkImpl: *impl, Mutate: *mutate}
	for _, e := range sites.List() {
		opt.Sites = append(opt.Sites, reproc.Site{Op: e.Fault.Op, Child: e.Fault.Child, Site: e.Site})
	}
	c, err := reproc.Translate(p, opt)
	if err != nil {
		fmt.Fprintf(stderr, "forkfuzz repro-c: %s: %v\n", fs.Arg(0), err)
		return exitError
	}
	if _, err := stdout.Write(c); err != nil {
		fmt.Fprintln(stderr, "forkfuzz repro-c:", err)
		return exitError
	}
	return exitClean
}
