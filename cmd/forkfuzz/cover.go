package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/cover"
)

func init() {
	commands = append(commands, command{name: "cover", args: "[flags] WORKDIR",
		help: "report the kernel coverage (KCOV) a campaign's corpus reached: fork/mm functions", run: cmdCover})
}

// coverOpts are run's coverage flags.
type coverOpts struct {
	blind, guided, off, noStates *bool
	csv, seed                    *string
	every                        *int
}

// coverFlags adds run's coverage flags.
func coverFlags(fs *flag.FlagSet) *coverOpts {
	return &coverOpts{
		blind:    fs.Bool("blind", false, "the default: mutation ignores what runs reached (KCOV edges, memory states); both are still measured and kept in WORKDIR/corpus"),
		guided:   fs.Bool("guided", false, "let what runs reached (KCOV edges, memory states at forks) guide mutation; blind campaigns were at least as fast on the mutation benchmark, so blind is the default (docs/coverage.md)"),
		csv:      fs.String("cover-csv", "", "write coverage after every program to this CSV (seconds,programs,pcs,edges,forkmm_pcs,corpus)"),
		off:      fs.Bool("no-cover", false, "do not collect kernel coverage at all (to measure its cost)"),
		every:    coverEveryFlag(fs),
		noStates: noStatesFlag(fs),
		seed:     seedCorpusFlag(fs),
	}
}

// check refuses --blind with --guided.
func (co *coverOpts) check() error {
	if *co.blind && *co.guided {
		return errors.New("--guided: a campaign is blind (the default, --blind) or guided, not both")
	}
	return nil
}

// apply sets c's coverage fields.
func (co *coverOpts) apply(c *campaign.Config) {
	c.Blind = !*co.guided
	c.CoverCSV, c.NoCover, c.NoStates, c.SeedCorpus = *co.csv, *co.off, *co.noStates, *co.seed
	c.CoverEvery = *co.every
}

// coverEveryFlag is run's --cover-every (ci and coordinator have their own).
func coverEveryFlag(fs *flag.FlagSet) *int {
	return fs.Int("cover-every", 0, fmt.Sprintf("collect kernel coverage (KCOV, 1.3-1.5x a program's time) for one program in N (default: one fresh program in %d and every corpus mutation when --guided, one in %d when blind, which only reports it; 1: every program)", campaign.DefaultGuidedCoverEvery, campaign.DefaultBlindCoverEvery))
}

// noStatesFlag is --no-states, for run and bench mutants.
func noStatesFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("no-states", false, "guide by KCOV edges only: memory states at forks are neither kept nor fed back (to measure what they add)")
}

// seedCorpusFlag is --seed-corpus, for run and bench mutants.
func seedCorpusFlag(fs *flag.FlagSet) *string {
	return fs.String("seed-corpus", "", "start from this kept coverage corpus when the campaign's own is empty: a campaign's WORKDIR (its corpus of the same kernel build is copied) or a WORKDIR/corpus/ID directory")
}

func coverSummary(w io.Writer, st *campaign.Stats) {
	if st.Cover == "" {
		return
	}
	fmt.Fprintln(w, st.Cover)
	if st.CoverDir != "" && st.CoverCounts.PCs > 0 {
		fmt.Fprintf(w, "coverage corpus: %s (forkfuzz cover WORKDIR)\n", st.CoverDir)
	}
}

func cmdCover(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("cover", stderr)
	sysMap := fs.String("system-map", "", "symbolize with this System.map (or a saved /proc/kallsyms) instead of the corpus's kallsyms")
	all := fs.Bool("all", false, "list every covered function (and with --vmlinux every file), not only kernel/fork.c and mm/*.c")
	vmlinux := fs.String("vmlinux", "", "the kernel's vmlinux with DWARF line tables (forkfuzz kernel build --debug-info): report covered source lines per file")
	lines := fs.Bool("lines", false, "with --vmlinux: list every covered line (file:line)")
	if err := parseArgs(fs, args, "WORKDIR"); err != nil {
		return parseExit(err)
	}
	opt := cover.ReportOptions{All: *all}
	if *sysMap != "" {
		s, err := cover.LoadSymbols(*sysMap)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz cover: --system-map:", err)
			return exitError
		}
		opt.Symbols, opt.SymbolsFrom = s, *sysMap
	}
	if *lines && *vmlinux == "" {
		fmt.Fprintln(stderr, "forkfuzz cover: --lines needs --vmlinux")
		return exitError
	}
	if *vmlinux != "" {
		keep := cover.ForkMMUnit
		if *all {
			keep = nil
		}
		l, err := cover.LoadLines(*vmlinux, keep)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz cover: --vmlinux:", err)
			return exitError
		}
		opt.Lines, opt.LinesFrom, opt.ListLines = l, *vmlinux, *lines
	}
	if err := cover.Report(stdout, fs.Arg(0), opt); err != nil {
		fmt.Fprintln(stderr, "forkfuzz cover:", err)
		return exitError
	}
	return exitClean
}

func init() {
	commands = append(commands, command{name: "cover-plot", args: "[flags] OUT.svg NAME=CSV...",
		help: "plot coverage over time from run --cover-csv files (SVG)", run: cmdCoverPlot})
}

func cmdCoverPlot(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("cover-plot", stderr)
	title := fs.String("title", "kernel coverage over time", "plot title")
	if err := parseArgs(fs, args, "OUT.svg NAME=CSV..."); err != nil {
		return parseExit(err)
	}
	var series []*cover.Series
	for _, a := range fs.Args()[1:] {
		name, path, ok := strings.Cut(a, "=")
		if !ok {
			fmt.Fprintf(stderr, "forkfuzz cover-plot: %q: want NAME=CSV\n", a)
			return exitError
		}
		s, err := cover.ReadSeries(name, path)
		if err != nil {
			fmt.Fprintln(stderr, "forkfuzz cover-plot:", err)
			return exitError
		}
		series = append(series, s)
	}
	f, err := os.Create(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz cover-plot:", err)
		return exitError
	}
	cover.PlotSVG(f, *title, series)
	if err := f.Close(); err != nil {
		fmt.Fprintln(stderr, "forkfuzz cover-plot:", err)
		return exitError
	}
	return exitClean
}
