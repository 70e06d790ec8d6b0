package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/dist"
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

// serveLive serves the live campaign page of a coordinator's campaign on
// addr (its --http flag) and returns the address it listens on.
func serveLive(ctx context.Context, addr string, st *dist.Store, name, workdir string, stale time.Duration) (string, error) {
	l := &report.Live{Workdir: workdir, Title: "forkfuzz campaign " + name + " (live)",
		Poll: func(ctx context.Context) (*report.Snapshot, error) { return distSnapshot(ctx, st, name, stale) }}
	return l.Serve(ctx, addr)
}

// distSnapshot turns the coordinator's store into a live page's snapshot.
func distSnapshot(ctx context.Context, st *dist.Store, name string, stale time.Duration) (*report.Snapshot, error) {
	s, err := dist.ReadStatus(ctx, st)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	snap := &report.Snapshot{Status: []string{fmt.Sprintf("work queue: %d queued, %d held by agents, %d redeliveries", s.Queued, s.AckPending, s.Redeliveries)}}
	for _, cs := range s.Campaigns {
		if cs.State.Campaign != name {
			continue
		}
		state := "running"
		if cs.State.Finished {
			state = "finished"
		}
		snap.Status = append(snap.Status, fmt.Sprintf("campaign %s %s: started %s, %d published, %d done, %d redelivered, coordinator starts %d",
			name, state, cs.State.Started.UTC().Format(time.RFC3339), cs.State.Next, cs.Done, cs.Redelivered, cs.State.Starts))
		if cs.State.Kernel != "" {
			snap.Status = append(snap.Status, "kernel image sha256 "+cs.State.Kernel)
		}
		sm := campaign.Sample{Time: now.UTC(), Run: name + "@" + cs.State.Started.UTC().Format(time.RFC3339Nano), Target: cs.State.Target,
			Seed: cs.State.Seed, Elapsed: now.Sub(cs.State.Started).Seconds(), Programs: cs.Programs, Forks: cs.Forks,
			Events: cs.Events, Findings: int64(len(cs.Findings)), HarnessErrors: cs.Harness, Signatures: map[string]*campaign.SigCount{}}
		for _, f := range cs.Findings {
			sm.Signatures[f.Signature] = &campaign.SigCount{First: f.Time.UTC(), Last: f.Time.UTC()}
		}
		snap.Sample = sm
	}
	for _, h := range s.Agents {
		health := "ok"
		switch age := now.Sub(h.Time); {
		case h.Stopped:
			health = "stopped"
		case age > stale:
			health = "STALE"
		}
		snap.Agents = append(snap.Agents, report.AgentRow{Name: h.Agent, Health: health, Target: h.Target, Host: h.Host,
			Busy: h.Busy, Workers: h.Workers, Programs: h.Programs, Errors: h.Errors, LastSeen: now.Sub(h.Time)})
	}
	return snap, nil
}
