package main

import (
	"fmt"
	"io"

	"github.com/forkfuzz/forkfuzz/internal/version"
)

func init() {
	commands = append(commands, command{name: "version", help: "print forkfuzz's version and commit", run: cmdVersion})
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
	if err := parseArgs(fs, args, ""); err != nil {
		return parseExit(err)
	}
	fmt.Fprintln(stdout, version.String())
	return exitClean
}
