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
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if !noArgs(fs, stderr) {
		return exitError
	}
	fmt.Fprintln(stdout, version.String())
	return exitClean
}
