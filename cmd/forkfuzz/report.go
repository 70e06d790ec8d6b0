package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/campaign/dist"
	"github.com/forkfuzz/forkfuzz/campaign/report"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
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
	// A finding directory that cannot be read is left out with a warning
	// (here and on the page); a dir that is no workdir is an error.
	path, warns, err := report.WriteCampaign(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "forkfuzz report:", err)
		return exitError
	}
	for _, w := range warns {
		fmt.Fprintln(stderr, "forkfuzz report: warning:", w)
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

// runFlags registers run's --resume and --metrics-addr; the function it
// returns, called once the target is open, points cfg at the workdir's
// corpus for this target and kernel build and serves the metrics.
func runFlags(fs *flag.FlagSet) func(ctx context.Context, cfg *campaign.Config, t agents.Target) error {
	resume := fs.Bool("resume", true, "keep the mutation corpus in WORKDIR/corpus/TARGET-KERNEL and continue from it")
	metrics := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. :9464; updated with every stats sample)")
	return func(ctx context.Context, cfg *campaign.Config, t agents.Target) error {
		if *resume {
			kernel := ""
			if k := fs.Lookup("kernel"); k != nil {
				kernel = k.Value.String()
			}
			cfg.Corpus = filepath.Join(cfg.Workdir, "corpus", campaign.CorpusScope(t.Name(), kernelID(t.Name(), kernel)))
		}
		if *metrics == "" {
			return nil
		}
		m := dist.NewMetrics()
		addr, errc, err := m.Serve(ctx, *metrics, nil)
		if err != nil {
			return err
		}
		go func() {
			if err := <-errc; err != nil {
				fmt.Fprintln(cfg.Log, "forkfuzz run:", err)
			}
		}()
		fmt.Fprintf(cfg.Log, "metrics: http://%s/metrics\n", addr)
		var prev campaign.Sample
		cfg.OnSample = func(s campaign.Sample) {
			m.Programs.Add(float64(s.Programs - prev.Programs))
			m.Forks.Add(float64(s.Forks - prev.Forks))
			m.Events.Add(float64(s.Events - prev.Events))
			m.Findings.Add(float64(s.Findings - prev.Findings))
			m.HarnessErrors.Add(float64(s.HarnessErrors - prev.HarnessErrors))
			prev = s
		}
		return nil
	}
}

// kernelID names the kernel build a target runs: the host kernel's release
// and a hash of its version string, a VM kernel image's SHA-256 prefix, or
// nothing for the simulated kernel (its target name says the model).
func kernelID(target, image string) string {
	switch {
	case target == "native":
		var u unix.Utsname
		if unix.Uname(&u) != nil {
			return "unknown"
		}
		h := sha256.Sum256(u.Version[:])
		return unix.ByteSliceToString(u.Release[:]) + "-" + hex.EncodeToString(h[:4])
	case image != "":
		fd, err := fsutil.OpenRegular(image, math.MaxInt64) // not a FIFO or /dev/zero
		if err != nil {
			return "unknown"
		}
		defer fd.Close()
		h := sha256.New()
		io.Copy(h, fd)
		return hex.EncodeToString(h.Sum(nil)[:6])
	}
	return ""
}
