package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	Drawn        string            `json:"drawn,omitempty"` // campaign.Finding.Origin
	Target       string            `json:"target"`
	Corrupt      string            `json:"corrupt,omitempty"`
	Program      string            `json:"program"`
	Observation  *obs.Observation  `json:"observation,omitempty"`
	Minimized    *Minimized        `json:"minimized,omitempty"`
	// MinimizeSkipped says why no agent minimized it (Minimized is nil).
	MinimizeSkipped string `json:"minimize_skipped,omitempty"`
	// TargetArgs, KernelID and Version: the replay flags and kernel of the
	// agent that found it, and the coordinator's forkfuzz version.
	TargetArgs []string          `json:"target_args,omitempty"`
	KernelID   campaign.KernelID `json:"kernel_id,omitzero"`
	Version    string            `json:"version,omitempty"`
	// NoCover: the run that showed it collected no kernel coverage
	// (Result.NoCover); its minimization and replays run the same way.
	NoCover bool `json:"no_cover,omitempty"`
	// NoCensus: it took no page census at forks (Result.NoForkPages).
	NoCensus bool `json:"no_census,omitempty"`
}

// minimizePending reports whether the finding still waits for an agent's
// minimization.
func (rec *FindingRecord) minimizePending() bool {
	return rec.Minimized == nil && rec.MinimizeSkipped == ""
}

// findingOwner is the program that showed a signature first.
type findingOwner struct {
	campaign string
	index    int64
}

// saveFinding creates the finding of is.Signature if no program showed it
// before, and reports whether this program is the one that showed it first.
// A new finding's record is stored, its directory written, and an agent
// asked to minimize it.
func (c *coord) saveFinding(ctx context.Context, r *Result, is judge.Issue) (bool, error) {
	key := FindingKey(is.Signature)
	meta := FindingMeta{Signature: is.Signature, Campaign: c.cfg.Campaign, Index: r.Index, Agent: r.Agent, Time: time.Now()}
	// Findings entries are never deleted: one known to belong to another
	// program needs no round trip to the bucket.
	c.mu.Lock()
	first, known := c.firstOf[key]
	c.mu.Unlock()
	if known && first != (findingOwner{meta.Campaign, meta.Index}) {
		return false, nil // seen before
	}
	mb, _ := json.Marshal(meta)
	if _, err := c.s.Findings.Create(ctx, key, mb); errors.Is(err, jetstream.ErrKeyExists) {
		e, err := c.s.Findings.Get(ctx, key)
		if err != nil {
			return false, fmt.Errorf("finding %s: %w", key, err)
		}
		var old FindingMeta
		if json.Unmarshal(e.Value(), &old) != nil {
			return false, nil // not ours to judge
		}
		c.mu.Lock()
		c.firstOf[key] = findingOwner{old.Campaign, old.Index}
		c.mu.Unlock()
		if old.Campaign != meta.Campaign || old.Index != meta.Index {
			return false, nil // seen before
		}
		// This very program created it before a crash (or is being
		// handled twice at once): finish the job.
		meta = old
	} else if err != nil {
		return false, fmt.Errorf("finding %s: %w", key, err)
	} else {
		c.mu.Lock()
		c.firstOf[key] = findingOwner{meta.Campaign, meta.Index}
		c.mu.Unlock()
	}
	c.recMu.Lock()
	defer c.recMu.Unlock()
	rec, err := c.record(ctx, key)
	if err != nil {
		return false, err
	}
	if rec == nil {
		c.mu.Lock()
		corrupt := c.state.Corrupt
		c.mu.Unlock()
		rec = &FindingRecord{Meta: meta, Oracle: string(is.Oracle), Explanation: is.Explanation, Files: is.Files,
			CampaignSeed: r.CampaignSeed, ProgramSeed: r.Seed, Drawn: r.Drawn, Target: r.Target, Corrupt: corrupt,
			Program: r.Program, Observation: r.Observation, TargetArgs: r.TargetArgs, Version: version.String(), NoCover: r.NoCover, NoCensus: r.NoForkPages}
		if r.KernelID != nil {
			rec.KernelID = *r.KernelID
		}
		if err := c.putRecord(ctx, key, rec); err != nil {
			return false, err
		}
		c.log.Info("new finding", "signature", is.Signature, "index", r.Index, "seed", r.Seed, "agent", r.Agent)
	}
	if rec.minimizePending() {
		if err := c.requestMinimize(ctx, rec); err != nil {
			return false, err
		}
	}
	if err := c.writeRecordDir(rec, true); err != nil {
		return false, err
	}
	return true, nil
}

// record reads a finding's record (nil: none stored yet).
func (c *coord) record(ctx context.Context, key string) (*FindingRecord, error) {
	b, err := c.s.Repro.GetBytes(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("finding %s: %w", key, err)
	}
	var rec FindingRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("finding %s: %w", key, err)
	}
	return &rec, nil
}

func (c *coord) putRecord(ctx context.Context, key string, rec *FindingRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("finding %s: %w", key, err)
	}
	if _, err := c.s.Repro.PutBytes(ctx, key, b); err != nil {
		return fmt.Errorf("finding %s: reproducer: %w", key, err)
	}
	return nil
}

// requestMinimize asks an agent to minimize a finding: a Work with
// Minimize set, on the work subject of the campaign's target, with one
// message ID per finding (a request made again after a crash is dropped by
// the stream). The campaign does not finish while the answer is pending.
func (c *coord) requestMinimize(ctx context.Context, rec *FindingRecord) error {
	c.mu.Lock()
	w := Work{V: WireVersion, Campaign: c.cfg.Campaign, CampaignSeed: rec.CampaignSeed, Index: rec.Meta.Index,
		Seed: rec.ProgramSeed, Program: rec.Program, Target: c.state.Target, Kernel: c.state.Kernel, Corrupt: rec.Corrupt,
		Minimize: rec.Meta.Signature, NoCover: rec.NoCover, NoForkPages: rec.NoCensus, Sites: campaign.AimSites(rec.Observation).List()}
	c.minPending[FindingKey(rec.Meta.Signature)] = true
	c.mu.Unlock()
	b, _ := json.Marshal(w)
	if _, err := c.s.JS.Publish(ctx, workSubject(w.Target), b, jetstream.WithMsgID(minimizeMsgID(w.Campaign, w.Minimize))); err != nil {
		return fmt.Errorf("finding %s: asking for its minimization: %w", FindingKey(w.Minimize), err)
	}
	c.log.Debug("minimization requested", "signature", w.Minimize, "index", w.Index)
	return nil
}

// handleMinimized stores an agent's minimization in the finding's record
// and rewrites its directory, then acknowledges it.
func (c *coord) handleMinimized(ctx context.Context, m jetstream.Msg) error {
	r, err := DecodeMinimizeResult(m.Data())
	if err != nil {
		c.log.Error("dropping an undecodable minimize result", "err", err)
		return m.TermWithReason(err.Error())
	}
	sig := r.Minimized.Signature
	key := FindingKey(sig)
	c.recMu.Lock()
	defer c.recMu.Unlock()
	rec, err := c.record(ctx, key)
	if err != nil {
		return err
	}
	if rec == nil || rec.Meta.Campaign != r.Campaign || rec.Meta.Index != r.Index {
		c.log.Warn("dropping a minimize result for no stored finding", "signature", sig, "index", r.Index, "agent", r.Agent)
		c.minimizeDone(key)
		return m.Ack()
	}
	if rec.minimizePending() {
		if r.Skipped != "" {
			rec.MinimizeSkipped = r.Skipped
			c.log.Info("finding not minimized", "signature", sig, "why", r.Skipped)
		} else {
			min := r.Minimized
			rec.Minimized = &min
			ops := 0
			if p, err := prog.Parse([]byte(min.Program)); err == nil {
				ops = len(p.Ops)
			}
			c.log.Info("finding minimized", "signature", sig, "agent", r.Agent, "ops", ops,
				"reproduced", fmt.Sprintf("%d/%d", min.Reproduced, min.Replays))
		}
		if err := c.putRecord(ctx, key, rec); err != nil {
			return err
		}
	}
	if err := c.writeRecordDir(rec, true); err != nil {
		return err
	}
	c.minimizeDone(key)
	if err := m.Ack(); err != nil {
		c.log.Warn("acknowledging a stored minimize result", "signature", sig, "err", err)
	}
	return nil
}

// minimizeDone forgets a pending minimization and wakes the producer,
// which may be waiting for it to finish the campaign.
func (c *coord) minimizeDone(key string) {
	c.mu.Lock()
	delete(c.minPending, key)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// restoreFinding, on a coordinator's start, writes the directory of a
// stored finding of this campaign that a crash kept from being written,
// and asks again for its minimization if none was stored (unless the
// campaign had finished: then no worker may be there to answer).
func (c *coord) restoreFinding(ctx context.Context, key string) error {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	rec, err := c.record(ctx, key)
	if err != nil || rec == nil {
		return err // nil: its result is not acknowledged yet; it comes again
	}
	if rec.minimizePending() && !c.wasFinished {
		if err := c.requestMinimize(ctx, rec); err != nil {
			return err
		}
	}
	return c.writeRecordDir(rec, false)
}

// writeRecordDir writes the workdir directory of a finding (always, or only
// if it is missing), with c.recMu held.
func (c *coord) writeRecordDir(rec *FindingRecord, always bool) error {
	if c.cfg.Workdir == "" {
		return nil
	}
	f, err := rec.Finding()
	if err != nil {
		return fmt.Errorf("finding %s: %w", FindingKey(rec.Meta.Signature), err)
	}
	if !always && c.files.Exists(f.Issue.Signature) {
		return nil
	}
	dir, err := c.files.Save(f)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if !slices.Contains(c.st.Saved, dir) {
		c.st.Saved = append(c.st.Saved, dir)
	}
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
		Index: rec.Meta.Index, ProgramSeed: rec.ProgramSeed, Origin: rec.Drawn, Corrupt: rec.Corrupt,
		TargetArgs: rec.TargetArgs, Kernel: rec.KernelID, Version: rec.Version, NoCover: rec.NoCover, NoCensus: rec.NoCensus,
	}
	if m := rec.Minimized; m != nil {
		if f.Minimized, err = prog.Parse([]byte(m.Program)); err != nil {
			return nil, fmt.Errorf("minimized program: %w", err)
		}
		f.MinObs, f.MinRuns, f.Replays, f.Reproduced = m.Observation, m.Runs, m.Replays, m.Reproduced
		f.MinTries, f.NotRepeated = max(m.Tries, 1), m.NotRepeated
		f.AimNote, f.AimRuns = m.Aimed, m.AimRuns
		f.MinIssue = judge.Issue{Oracle: checker.Oracle(rec.Oracle), Signature: m.Signature, Explanation: m.Explanation}
	}
	return f, nil
}
