package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/version"
)

// FindingMeta is a findings bucket entry: the first program that showed a
// signature. Creating it is what makes a finding new, so redelivered
// results never duplicate one.
type FindingMeta struct {
	Signature string    `json:"signature"`
	Campaign  string    `json:"campaign"`
	Index     int64     `json:"index"`
	Agent     string    `json:"agent"`
	Time      time.Time `json:"time"`
}

// FindingRecord is a finding's content in the reproducer object store.
type FindingRecord struct {
	Meta         FindingMeta       `json:"meta"`
	Oracle       string            `json:"oracle"`
	Explanation  string            `json:"explanation"`
	Files        map[string]string `json:"files,omitempty"`
	CampaignSeed uint64            `json:"campaign_seed"`
	ProgramSeed  uint64            `json:"program_seed"`
	Target       string            `json:"target"`
	Corrupt      string            `json:"corrupt,omitempty"`
	Program      string            `json:"program"`
	Observation  *obs.Observation  `json:"observation,omitempty"`
	Minimized    *Minimized        `json:"minimized,omitempty"`
	// TargetArgs, KernelID and Version: the replay flags and kernel of the
	// agent that found it, and the coordinator's forkfuzz version.
	TargetArgs []string          `json:"target_args,omitempty"`
	KernelID   campaign.KernelID `json:"kernel_id,omitzero"`
	Version    string            `json:"version,omitempty"`
}

// saveFinding creates the finding of is.Signature if no program showed it
// before, and reports whether this program is the one that showed it first.
func (c *coord) saveFinding(ctx context.Context, r *Result, is judge.Issue) (bool, error) {
	key := FindingKey(is.Signature)
	meta := FindingMeta{Signature: is.Signature, Campaign: c.cfg.Campaign, Index: r.Index, Agent: r.Agent, Time: time.Now()}
	mb, _ := json.Marshal(meta)
	if _, err := c.s.Findings.Create(ctx, key, mb); errors.Is(err, jetstream.ErrKeyExists) {
		e, err := c.s.Findings.Get(ctx, key)
		if err != nil {
			return false, fmt.Errorf("finding %s: %w", key, err)
		}
		var old FindingMeta
		if json.Unmarshal(e.Value(), &old) != nil || old.Campaign != meta.Campaign || old.Index != meta.Index {
			return false, nil // seen before
		}
		// This very program created it before a crash: finish the job.
	} else if err != nil {
		return false, fmt.Errorf("finding %s: %w", key, err)
	}
	rec := FindingRecord{Meta: meta, Oracle: string(is.Oracle), Explanation: is.Explanation, Files: is.Files,
		CampaignSeed: r.CampaignSeed, ProgramSeed: r.Seed, Target: r.Target, Corrupt: c.state.Corrupt,
		Program: r.Program, Observation: r.Observation, TargetArgs: r.TargetArgs, Version: version.String()}
	if r.KernelID != nil {
		rec.KernelID = *r.KernelID
	}
	for k := range r.Minimized {
		if r.Minimized[k].Signature == is.Signature {
			rec.Minimized = &r.Minimized[k]
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("finding %s: %w", key, err)
	}
	if _, err := c.s.Repro.PutBytes(ctx, key, b); err != nil {
		return false, fmt.Errorf("finding %s: reproducer: %w", key, err)
	}
	if err := c.writeFindingDir(ctx, key, true); err != nil {
		return false, err
	}
	c.log.Info("new finding", "signature", is.Signature, "index", r.Index, "seed", r.Seed, "agent", r.Agent)
	return true, nil
}

// writeFindingDir writes the workdir directory of a stored finding (always,
// or only if it is missing).
func (c *coord) writeFindingDir(ctx context.Context, key string, always bool) error {
	if c.cfg.Workdir == "" {
		return nil
	}
	b, err := c.s.Repro.GetBytes(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil // its result is not acknowledged yet: it comes again
	} else if err != nil {
		return fmt.Errorf("finding %s: %w", key, err)
	}
	var rec FindingRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("finding %s: %w", key, err)
	}
	f, err := rec.Finding()
	if err != nil {
		return fmt.Errorf("finding %s: %w", key, err)
	}
	if !always && c.files.Exists(f.Issue.Signature) {
		return nil
	}
	dir, err := c.files.Save(f)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.st.Saved = append(c.st.Saved, dir)
	c.mu.Unlock()
	return nil
}

// Finding turns a stored record into a campaign finding (for its
// directory and report).
func (rec *FindingRecord) Finding() (*campaign.Finding, error) {
	p, err := prog.Parse([]byte(rec.Program))
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	f := &campaign.Finding{
		Issue:   judge.Issue{Oracle: checker.Oracle(rec.Oracle), Signature: rec.Meta.Signature, Explanation: rec.Explanation, Files: rec.Files},
		Program: p, Observation: rec.Observation, Target: rec.Target, CampaignSeed: rec.CampaignSeed,
		Index: rec.Meta.Index, ProgramSeed: rec.ProgramSeed, Corrupt: rec.Corrupt,
		TargetArgs: rec.TargetArgs, Kernel: rec.KernelID, Version: rec.Version,
	}
	if m := rec.Minimized; m != nil {
		if f.Minimized, err = prog.Parse([]byte(m.Program)); err != nil {
			return nil, fmt.Errorf("minimized program: %w", err)
		}
		f.MinObs, f.MinRuns, f.Replays, f.Reproduced = m.Observation, m.Runs, m.Replays, m.Reproduced
		f.MinIssue = judge.Issue{Oracle: checker.Oracle(rec.Oracle), Signature: m.Signature, Explanation: m.Explanation}
	}
	return f, nil
}
