package dist

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

// CampaignStatus is one campaign at a glance.
type CampaignStatus struct {
	State       State
	Done        int64 // programs with a stored result
	Programs    int64 // of which ran
	Forks       int64
	Events      int64
	Harness     int64
	Redelivered int64
	Findings    []FindingMeta
}

// Status is what `forkfuzz status` prints.
type Status struct {
	Campaigns []CampaignStatus
	Agents    []Heartbeat
	// Queued is work in the work stream (not yet acknowledged);
	// AckPending the part of it that agents hold now.
	Queued     uint64
	AckPending int
	// Redeliveries is the agents' consumers' count of messages delivered
	// more than once since they were created.
	Redeliveries int
	// Other findings: those first seen by campaigns no longer stored.
	Findings int
}

// ReadStatus reads every campaign, agent and finding in the store.
func ReadStatus(ctx context.Context, s *Store) (*Status, error) {
	st := &Status{}
	byName := map[string]*CampaignStatus{}
	err := watchAll(ctx, s.State, ">", func(key string, v []byte) error {
		var cs CampaignStatus
		if err := json.Unmarshal(v, &cs.State); err != nil {
			return fmt.Errorf("state %s: %w", key, err)
		}
		st.Campaigns = append(st.Campaigns, cs)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dist: status: %w", err)
	}
	for k := range st.Campaigns {
		cs := &st.Campaigns[k]
		byName[cs.State.Campaign] = cs
		err := watchAll(ctx, s.Done, cs.State.Campaign+".>", func(key string, v []byte) error {
			var d Done
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("done %s: %w", key, err)
			}
			cs.Done++
			if d.Delivered > 1 {
				cs.Redelivered++
			}
			if d.Harness != "" {
				cs.Harness++
				return nil
			}
			cs.Programs++
			cs.Forks += int64(d.Forks)
			if len(d.Signatures) > 0 {
				cs.Events++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("dist: status: %w", err)
		}
	}
	err = watchAll(ctx, s.Findings, ">", func(key string, v []byte) error {
		var m FindingMeta
		if json.Unmarshal(v, &m) != nil {
			return nil
		}
		st.Findings++
		if cs := byName[m.Campaign]; cs != nil {
			cs.Findings = append(cs.Findings, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dist: status: %w", err)
	}
	err = watchAll(ctx, s.Agents, ">", func(key string, v []byte) error {
		if h, err := DecodeHeartbeat(v); err == nil {
			st.Agents = append(st.Agents, *h)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dist: status: %w", err)
	}
	sort.Slice(st.Agents, func(i, j int) bool { return st.Agents[i].Agent < st.Agents[j].Agent })
	wi, err := s.Work.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dist: status: work stream: %w", err)
	}
	st.Queued = wi.State.Msgs
	lister := s.Work.ListConsumers(ctx)
	for ci := range lister.Info() {
		st.AckPending += ci.NumAckPending
		st.Redeliveries += ci.NumRedelivered
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("dist: status: consumers: %w", err)
	}
	return st, nil
}

// Print writes the status for people. An agent whose last heartbeat is
// older than stale is marked as such.
func (st *Status) Print(w io.Writer, now time.Time, stale time.Duration) {
	fmt.Fprintf(w, "work queue: %d queued, %d held by agents, %d redeliveries\n", st.Queued, st.AckPending, st.Redeliveries)
	for _, cs := range st.Campaigns {
		s := cs.State
		state := "running"
		if s.Finished {
			state = "finished"
		}
		limit := "no limit"
		if s.Programs > 0 {
			limit = fmt.Sprintf("of %d", s.Programs)
		}
		fmt.Fprintf(w, "campaign %s (%s; target %s, seed %d, started %s, coordinator starts %d)\n",
			s.Campaign, state, s.Target, s.Seed, s.Started.UTC().Format(time.RFC3339), s.Starts)
		fmt.Fprintf(w, "  programs: %d done %s, %d published, %d queued, %d redelivered, %d harness errors\n",
			cs.Done, limit, s.Next, s.Next-cs.Done, cs.Redelivered, cs.Harness)
		fmt.Fprintf(w, "  forks %d, failing runs %d, new findings %d\n", cs.Forks, cs.Events, len(cs.Findings))
		sort.Slice(cs.Findings, func(i, j int) bool { return cs.Findings[i].Index < cs.Findings[j].Index })
		for _, f := range cs.Findings {
			fmt.Fprintf(w, "    finding %s (program %d, agent %s, %s)\n", f.Signature, f.Index, f.Agent, f.Time.UTC().Format(time.RFC3339))
		}
	}
	fmt.Fprintf(w, "agents: %d\n", len(st.Agents))
	for _, h := range st.Agents {
		health := "ok"
		switch age := now.Sub(h.Time); {
		case h.Stopped:
			health = "stopped"
		case age > stale:
			health = "STALE"
		}
		fmt.Fprintf(w, "  %-24s %-7s target %-6s host %s, %d/%d busy, %d programs, %d harness errors, last heartbeat %s ago\n",
			h.Agent, health, h.Target, h.Host, h.Busy, h.Workers, h.Programs, h.Errors, now.Sub(h.Time).Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "findings stored (all campaigns): %d\n", st.Findings)
}
