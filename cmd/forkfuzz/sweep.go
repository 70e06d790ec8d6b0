package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign/sweep"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
)

func init() {
	commands = append(commands, command{name: "sweep", args: "[flags] PROG",
		help: "inject a fault at every failure point of each fork (fail_nth=1,2,...) and judge the rollback", run: cmdSweep})
}

func cmdSweep(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sweep", stderr)
	openTarget := targetFlags(fs, "native")
	maxK := fs.Int("max", 0, "stop each fork's sweep after this many failure points (default 100000)")
	stride := fs.Int("stride", 1, "try every N-th failure point only")
	forks := fs.String("forks", "", "comma-separated fork numbers to sweep (default: every fork of the main process)")
	verbose := fs.Bool("v", false, "log every run")
	childOOM := fs.Uint64("child-oom", 0, "with --child: sweep memory cgroup limits on the child's side instead, child_oom=STEP, 2*STEP, ... bytes (e.g. 4096) until the child stays within one")
	settle := fs.Int("settle", 12, "before sweeping a fork, run up to N probes (no fault) until three in a row count the same failure points: a fresh executor's first programs still change what fork copies (0: no probes; not with --child)")
	programPart := fs.Bool("program-part", false, "end each fork's sweep at the first failure point past the program's memory (an `arena low` program: the points after it are the Go runtime's, which move from run to run)")
	child := fs.Bool("child", false, "sweep the child's failure points before user space (childfail=1,2,...: under Async-fork, the child's copy of the page tables) instead of the fork's")
	positive(fs, "stride")
	if err := parseArgs(fs, args, "PROG"); err != nil {
		return parseExit(err)
	}
	p, err := readProgram(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz sweep:", err)
		return exitError
	}
	if *childOOM > 0 && !*child {
		fmt.Fprintln(stderr, "forkfuzz sweep: --child-oom needs --child")
		return exitError
	}
	opt := sweep.Options{MaxK: *maxK, Stride: *stride, Child: *child, ChildOOMStep: *childOOM, Settle: *settle, ProgramPart: *programPart}
	if *verbose {
		opt.Log = stderr
	}
	for _, s := range strings.Split(*forks, ",") {
		if s = strings.TrimSpace(strings.TrimPrefix(s, "f")); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				fmt.Fprintf(stderr, "forkfuzz sweep: bad fork %q in --forks\n", s)
				return exitError
			}
			opt.Forks = append(opt.Forks, n)
		}
	}
	t, err := openTarget()
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz sweep:", err)
		return exitError
	}
	defer t.Close()
	res, err := sweep.Run(t, p, opt)
	if res != nil && (err == nil || len(res.Forks) > 0) {
		printSweep(stdout, res) // with an error: the forks swept before it
	}
	var ue *sweep.UnsupportedError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "forkfuzz sweep: %v\nforkfuzz sweep: nothing was swept; use a kernel with fault injection (forkfuzz kernel build, or --target qemu --kernel IMAGE)\n", err)
		return exitError
	case err != nil:
		fmt.Fprintln(stderr, "forkfuzz sweep:", err)
		return exitError
	}
	for _, fr := range res.Forks {
		if len(fr.Findings) > 0 {
			return exitFindings
		}
	}
	return exitClean
}

func printSweep(w io.Writer, res *sweep.Result) {
	total := 0
	for _, fr := range res.Forks {
		var errs []string
		var keys []int
		for e := range fr.Errnos {
			keys = append(keys, e)
		}
		sort.Ints(keys)
		for _, e := range keys {
			errs = append(errs, fmt.Sprintf("errno %d x%d", e, fr.Errnos[e]))
		}
		pts := "unknown"
		switch {
		case fr.Points >= 0:
			pts = strconv.Itoa(fr.Points)
		case len(fr.Probes) > 0:
			pts = fmt.Sprintf("%d (the last probe's count; not swept to the end)", fr.Probes[len(fr.Probes)-1])
		}
		if fr.ChildSignals != nil {
			var sigs []string
			var ks []int
			for s := range fr.ChildSignals {
				ks = append(ks, s)
			}
			sort.Ints(ks)
			for _, s := range ks {
				sigs = append(sigs, fmt.Sprintf("signal %d x%d", s, fr.ChildSignals[s]))
			}
			var phases []string
			for ph, n := range fr.Phases {
				if ph == "" {
					ph = "unknown"
				}
				phases = append(phases, fmt.Sprintf("%s x%d", ph, n))
			}
			sort.Strings(phases)
			what := "failure points before user space"
			if fr.ChildOOMStep > 0 {
				what = fmt.Sprintf("memory cgroup limits (steps of %d bytes) the child ran into before user space", fr.ChildOOMStep)
			}
			fmt.Fprintf(w, "fork f%d (op %d), the child's side: %s %s; %d runs in %v (%v/run): child died %d times (%s), reached user space despite the fault %d times; faults struck in: %s; %d runs repeated (the child ran before it was armed); %d findings; %s\n",
				fr.Fork, fr.Op, pts, what, fr.Runs, fr.Elapsed.Round(time.Millisecond), (fr.Elapsed / time.Duration(max(fr.Runs, 1))).Round(time.Millisecond),
				fr.ChildKilled, strings.Join(sigs, ", "), fr.ChildSurvived, strings.Join(phases, ", "), fr.Unarmed, len(fr.Findings), fr.Stopped)
		} else {
			fmt.Fprintf(w, "fork f%d (op %d): %s failure points; %d runs in %v (%v/run): fork failed %d times (%s), fork returned success despite the fault %d times; %d findings; %s\n",
				fr.Fork, fr.Op, pts, fr.Runs, fr.Elapsed.Round(time.Millisecond), (fr.Elapsed / time.Duration(max(fr.Runs, 1))).Round(time.Millisecond),
				fr.Failed, strings.Join(errs, ", "), fr.Tolerated, len(fr.Findings), fr.Stopped)
		}
		if len(fr.Probes) > 0 {
			how := "settled"
			switch {
			case !fr.Settled && fr.ProgramPoints >= 0 && fr.PartNote == "":
				how = fmt.Sprintf("NOT settled (the count still moved: the runtime's part; K values 1..%d, the program's part, do not depend on it)", fr.ProgramPoints)
			case !fr.Settled:
				how = "NOT settled (the count still moved; K values of this sweep may not replay)"
			}
			fmt.Fprintf(w, "  probes before the sweep (failure points per run, no fault): %s: %s\n", strings.Trim(fmt.Sprint(fr.Probes), "[]"), how)
		}
		if fr.Moved != "" {
			fmt.Fprintf(w, "  warning: %s\n", fr.Moved)
		}
		if fr.ChildSignals == nil && len(fr.Parts) > 0 {
			fmt.Fprintf(w, "  %s\n", partLine(fr))
		}
		var sites []string
		for s := range fr.Sites {
			sites = append(sites, s)
		}
		sort.Slice(sites, func(i, j int) bool {
			return fr.Sites[sites[i]] > fr.Sites[sites[j]] || fr.Sites[sites[i]] == fr.Sites[sites[j]] && sites[i] < sites[j]
		})
		for _, s := range sites {
			name := s
			if name == "" {
				name = "(the kernel did not say where)"
			}
			fmt.Fprintf(w, "  %4d x %s\n", fr.Sites[s], name)
		}
		for _, f := range fr.Findings {
			total++
			attr := "fail_nth"
			if fr.ChildSignals != nil {
				attr = "childfail"
			}
			if fr.ChildOOMStep > 0 {
				attr = fmt.Sprintf("child_oom=%d*", fr.ChildOOMStep)
			}
			fmt.Fprintf(w, "\nFAIL %s at fork f%d %s=%d\n%s\nreproducer:\n%s\n", f.Issue.Signature, f.Fork, attr, f.K, f.Issue.Explanation, f.Program.Format())
		}
	}
	fmt.Fprintf(w, "sweep: %d forks in %v, %d findings\n", len(res.Forks), res.Elapsed.Round(time.Millisecond), total)
}

// partLine says how many of a fork's failure points lie in the program's
// part (the same on every run) and how many failed runs stopped where.
func partLine(fr sweep.ForkResult) string {
	counts := fmt.Sprintf("failed runs that stopped in the program's part %d, past it (the Go runtime's memory) %d, unmeasured %d",
		fr.Parts[obs.PartProgram], fr.Parts[obs.PartRuntime], fr.Parts[""])
	switch {
	case fr.PartNote != "":
		return "program's part: unknown (" + fr.PartNote + "); " + counts
	case fr.ProgramPoints >= 0:
		pts := strconv.Itoa(fr.ProgramPoints)
		if fr.ProgramPointsMax > fr.ProgramPoints {
			pts = fmt.Sprintf("%d to %d (--stride)", fr.ProgramPoints, fr.ProgramPointsMax)
		}
		return fmt.Sprintf("program's part: failure points 1..%s (fork's set-up, the executor's image, the program's regions: the same on every run); %s", pts, counts)
	default:
		return "program's part: unknown (no failed run stopped past the program's memory); " + counts
	}
}
