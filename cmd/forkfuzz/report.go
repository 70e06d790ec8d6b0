package main

import (
	"fmt"
	"io"
	"os"

	"github.com/forkfuzz/forkfuzz/campaign/report"
)

func init() {
	commands = append(commands, command{name: "report", args: "WORKDIR",
		help: "write WORKDIR/index.html (the campaign page) and every finding's report.html", run: cmdReport})
}

func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("report", stderr)
	if fs.Parse(args) != nil {
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: forkfuzz report WORKDIR")
		return exitError
	}
	dir := fs.Arg(0)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "forkfuzz report: %s: not a workdir (no such directory)\n", dir)
		return exitError
	}
	path, err := report.WriteCampaign(dir)
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz report:", err)
		return exitError
	}
	fmt.Fprintln(stdout, path)
	return exitClean
}
