package dist

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// WireVersion is the version of every message below. A peer that speaks
// another version is refused with an error naming both versions.
const WireVersion = 4

// Work is one program to run: published by the coordinator on the work
// stream, pulled by exactly one agent at a time.
type Work struct {
	V            int    `json:"v"`
	Campaign     string `json:"campaign"`
	CampaignSeed uint64 `json:"campaign_seed"`
	Index        int64  `json:"index"`
	// Seed is the random source the program was generated or mutated
	// from: campaign.ProgramSeed(CampaignSeed, Index) unless Drawn says
	// otherwise (campaign.Origin.Note: a guided campaign's corpus
	// mutations, and its fresh programs after them).
	Seed    uint64 `json:"seed"`
	Drawn   string `json:"drawn,omitempty"`
	Program string `json:"program"`
	// Target is the target kind the program is meant for (native, qemu,
	// sim); Kernel the SHA-256 of the kernel image in the object store
	// (qemu only); Corrupt the test-only executor corruption.
	Target  string `json:"target"`
	Kernel  string `json:"kernel,omitempty"`
	Corrupt string `json:"corrupt,omitempty"`
	// Minimize, when set, makes this a minimization request instead of
	// a program to run once: reduce Program (the first program that
	// showed the signature Minimize, program Index of the campaign) while
	// the signature reproduces, and publish a MinimizeResult.
	Minimize string `json:"minimize,omitempty"`
	// Symbols asks the worker's target for the kernel's text symbols
	// with the coverage (agents.Options.Symbols), which the coordinator
	// keeps beside the campaign's corpus (kallsyms) for `forkfuzz cover`.
	Symbols bool `json:"symbols,omitempty"`
	// NoCover and NoForkPages switch kernel coverage and the page census
	// off for this program (agents.Options): the coordinator samples
	// both as a local campaign does (campaign.Config.CoverFor, CensusFor).
	// A minimization request's NoCover and NoForkPages are the
	// finding's program's.
	NoCover     bool `json:"no_cover,omitempty"`
	NoForkPages bool `json:"no_fork_pages,omitempty"`
	// Sites, on a minimization request, are the fault-injection sites
	// the finding's run recorded (campaign.AimSites): its replays aim the
	// forks' fail_nth and childfail at them.
	Sites []campaign.FaultSite `json:"sites,omitempty"`
}

// RunError is a target's error, carried as data so the coordinator judges
// it exactly as it would be judged where it happened.
type RunError struct {
	// Kind: "event" (the program made something happen that is a
	// finding: the executor died or hung, the kernel reported; Event
	// says what) or "harness" (the target could not run the program:
	// never a finding).
	Kind    string                `json:"kind"`
	Message string                `json:"message"`
	Event   *agents.RecordedEvent `json:"event,omitempty"`
}

// Minimized is an agent's reduction of one finding's program.
type Minimized struct {
	Signature   string           `json:"signature"`
	Program     string           `json:"program"`
	Observation *obs.Observation `json:"observation,omitempty"`
	Explanation string           `json:"explanation,omitempty"`
	Runs        int              `json:"runs"`
	Replays     int              `json:"replays"`
	Reproduced  int              `json:"reproduced"`
	// Tries is how many runs each minimization step got when the
	// program needed reruns to fail again (a race); 0 otherwise.
	Tries int `json:"tries,omitempty"`
	// NotRepeated: the program did not fail again, so it was not
	// minimized (Program is the original).
	NotRepeated bool `json:"not_repeated,omitempty"`
	// Aimed and AimRuns: how the replays aimed the forks' faults at
	// the recorded sites (campaign.Finding.AimNote, AimRuns).
	Aimed   string `json:"aimed,omitempty"`
	AimRuns int    `json:"aim_runs,omitempty"`
}

// Result is what an agent publishes for one Work.
type Result struct {
	V            int    `json:"v"`
	Campaign     string `json:"campaign"`
	CampaignSeed uint64 `json:"campaign_seed"`
	Index        int64  `json:"index"`
	Seed         uint64 `json:"seed"`
	Drawn        string `json:"drawn,omitempty"` // Work.Drawn
	Agent        string `json:"agent"`
	// Delivered is the work message's delivery count (>1: redelivered).
	Delivered uint64 `json:"delivered"`
	Target    string `json:"target"`
	Program   string `json:"program"`
	// Observation travels gob-encoded and zstd-compressed in
	// ObservationGob: a fraction of its JSON size and nine times faster to
	// decode, which is what bounds the coordinator's rate (EncodeResult).
	// One too large for a message is put in the object store, named by
	// ObservationRef, and fetched by the coordinator.
	Observation    *obs.Observation `json:"-"`
	ObservationGob []byte           `json:"observation_gob,omitempty"`
	ObservationRef string           `json:"observation_ref,omitempty"`
	Err            *RunError        `json:"error,omitempty"`
	Started        time.Time        `json:"started"`
	RunNanos       int64            `json:"run_ns"`
	// TargetArgs and KernelID: how to reopen the agent's target and which
	// kernel it ran (campaign.Finding's replay command and identity).
	TargetArgs []string           `json:"target_args,omitempty"`
	KernelID   *campaign.KernelID `json:"kernel_id,omitempty"`
	// NoCover is Work.NoCover: the run collected no kernel coverage (a
	// finding from it is minimized and replayed the same way).
	NoCover bool `json:"no_cover,omitempty"`
	// NoForkPages is Work.NoForkPages: the run took no page census.
	NoForkPages bool `json:"no_fork_pages,omitempty"`
}

// Heartbeat is an agent's periodic report, kept in the agents bucket.
type Heartbeat struct {
	V        int       `json:"v"`
	Agent    string    `json:"agent"`
	Host     string    `json:"host"`
	Target   string    `json:"target"`
	Workers  int       `json:"workers"`
	Busy     int       `json:"busy"`
	Programs int64     `json:"programs"`
	Errors   int64     `json:"harness_errors"`
	Time     time.Time `json:"time"`
	Stopped  bool      `json:"stopped,omitempty"`
}

// NewRunError encodes a target's error (nil: nil).
func NewRunError(err error) *RunError {
	if err == nil {
		return nil
	}
	if ev, ok := agents.AsEvent(err); ok {
		return &RunError{Kind: "event", Message: err.Error(), Event: agents.Record(ev)}
	}
	return &RunError{Kind: "harness", Message: err.Error()}
}

// Err turns it back into an error that judges like the target's (nil: nil).
func (e *RunError) Err() error {
	if e == nil {
		return nil
	}
	if e.Kind == "event" && e.Event != nil {
		return e.Event
	}
	return errors.New(e.Message)
}

// DecodeError says which message failed to decode and why.
type DecodeError struct {
	What string
	Err  error
}

func (e *DecodeError) Error() string { return "dist: decoding " + e.What + ": " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the message")
	}
	return nil
}

func checkVersion(v int) error {
	if v != WireVersion {
		return fmt.Errorf("wire version %d, this forkfuzz speaks %d", v, WireVersion)
	}
	return nil
}

// DecodeWork decodes and validates a Work: its version, campaign name,
// index and program (which must parse).
func DecodeWork(b []byte) (*Work, *prog.Program, error) {
	var w Work
	fail := func(err error) (*Work, *prog.Program, error) { return nil, nil, &DecodeError{What: "work", Err: err} }
	if err := decodeStrict(b, &w); err != nil {
		return fail(err)
	}
	if err := checkVersion(w.V); err != nil {
		return fail(err)
	}
	if err := ValidName(w.Campaign); err != nil {
		return fail(fmt.Errorf("field campaign: %w", err))
	}
	if w.Index < 0 {
		return fail(fmt.Errorf("field index: %d is negative", w.Index))
	}
	p, err := prog.Parse([]byte(w.Program))
	if err != nil {
		return fail(fmt.Errorf("field program: %w", err))
	}
	for i, e := range w.Sites {
		if e.Op < 0 || e.Op >= len(p.Ops) || p.Ops[e.Op].Kind != prog.OpFork {
			return fail(fmt.Errorf("field sites[%d]: op %d is not a fork of the program", i, e.Op))
		}
	}
	if len(w.Sites) == 0 {
		w.Sites = nil
	}
	return &w, p, nil
}

// EncodeResult encodes r for the wire.
func EncodeResult(r *Result) ([]byte, error) {
	c := *r
	c.ObservationGob = nil
	if r.Observation != nil {
		b, err := EncodeObservation(r.Observation)
		if err != nil {
			return nil, fmt.Errorf("dist: encoding the observation of program %d: %w", r.Index, err)
		}
		c.ObservationGob = b
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("dist: encoding the result of program %d: %w", r.Index, err)
	}
	return b, nil
}

// DecodeResult decodes and validates a Result: its version, campaign,
// index, program, error kind, and that the observation (if any) has one
// result per operation of the program.
func DecodeResult(b []byte) (*Result, *prog.Program, error) {
	var r Result
	var err error
	fail := func(err error) (*Result, *prog.Program, error) {
		return nil, nil, &DecodeError{What: "result", Err: err}
	}
	if err := decodeStrict(b, &r); err != nil {
		return fail(err)
	}
	if err := checkVersion(r.V); err != nil {
		return fail(err)
	}
	if len(r.ObservationGob) > 0 && r.ObservationRef != "" {
		return fail(errors.New("both observation_gob and observation_ref"))
	}
	if len(r.ObservationGob) > 0 {
		if r.Observation, err = DecodeObservation(r.ObservationGob); err != nil {
			return fail(fmt.Errorf("field observation_gob: %w", err))
		}
		r.ObservationGob = nil
	}
	if err := ValidName(r.Campaign); err != nil {
		return fail(fmt.Errorf("field campaign: %w", err))
	}
	if r.Index < 0 {
		return fail(fmt.Errorf("field index: %d is negative", r.Index))
	}
	p, err := prog.Parse([]byte(r.Program))
	if err != nil {
		return fail(fmt.Errorf("field program: %w", err))
	}
	if r.Err != nil {
		switch r.Err.Kind {
		case "harness":
		case "event":
			if r.Err.Event == nil || r.Err.Event.Sig == "" || r.Err.Event.OracleName == "" {
				return fail(errors.New("field error: kind event without an event (oracle and signature)"))
			}
		default:
			return fail(fmt.Errorf("field error: unknown kind %q", r.Err.Kind))
		}
	}
	if o := r.Observation; o != nil {
		if o.Version != obs.Version {
			return fail(fmt.Errorf("field observation: version %d, this forkfuzz reads %d", o.Version, obs.Version))
		}
		if len(o.Ops) != len(p.Ops) {
			return fail(fmt.Errorf("field observation: %d op results for a program of %d operations", len(o.Ops), len(p.Ops)))
		}
	} else if r.Err == nil && r.ObservationRef == "" {
		return fail(errors.New("neither observation nor error"))
	}
	return &r, p, nil
}

// MinimizeResult is an agent's answer to a minimization request (a Work
// with Minimize set): the reduced program, or why there is none.
type MinimizeResult struct {
	V        int    `json:"v"`
	Campaign string `json:"campaign"`
	Index    int64  `json:"index"` // the finding's program index
	Agent    string `json:"agent"`
	// Minimized.Signature is the request's signature; Minimized.Program
	// is empty when Skipped says why the agent did not minimize.
	Minimized Minimized `json:"minimized"`
	Skipped   string    `json:"skipped,omitempty"`
}

// DecodeMinimizeResult decodes and validates a MinimizeResult: its
// version, campaign, signature and program (which must parse unless the
// minimization was skipped).
func DecodeMinimizeResult(b []byte) (*MinimizeResult, error) {
	var r MinimizeResult
	fail := func(err error) (*MinimizeResult, error) { return nil, &DecodeError{What: "minimize result", Err: err} }
	if err := decodeStrict(b, &r); err != nil {
		return fail(err)
	}
	if err := checkVersion(r.V); err != nil {
		return fail(err)
	}
	if err := ValidName(r.Campaign); err != nil {
		return fail(fmt.Errorf("field campaign: %w", err))
	}
	if r.Minimized.Signature == "" {
		return fail(errors.New("field minimized.signature: empty"))
	}
	if r.Skipped != "" {
		if r.Minimized.Program != "" {
			return fail(errors.New("field skipped: set beside a minimized program"))
		}
		return &r, nil
	}
	p, err := prog.Parse([]byte(r.Minimized.Program))
	if err != nil {
		return fail(fmt.Errorf("field minimized.program: %w", err))
	}
	if o := r.Minimized.Observation; o != nil && len(o.Ops) != len(p.Ops) {
		return fail(fmt.Errorf("field minimized.observation: %d op results for a program of %d operations", len(o.Ops), len(p.Ops)))
	}
	return &r, nil
}

// maxObservation bounds a decompressed observation (a VM's console is
// 256 KiB; views of 16 regions of 1024 pages stay far below this).
const maxObservation = 256 << 20

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxObservation), zstd.WithDecoderConcurrency(0))
)

// EncodeObservation is the observation's wire form: gob, then zstd.
func EncodeObservation(o *obs.Observation) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(o); err != nil {
		return nil, err
	}
	return zenc.EncodeAll(b.Bytes(), nil), nil
}

// DecodeObservation decodes EncodeObservation's output.
func DecodeObservation(b []byte) (*obs.Observation, error) {
	raw, err := zdec.DecodeAll(b, nil)
	if err != nil {
		return nil, err
	}
	o := new(obs.Observation)
	if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(o); err != nil {
		return nil, err
	}
	return o, nil
}

// DecodeHeartbeat decodes and validates a Heartbeat.
func DecodeHeartbeat(b []byte) (*Heartbeat, error) {
	var h Heartbeat
	if err := decodeStrict(b, &h); err != nil {
		return nil, &DecodeError{What: "heartbeat", Err: err}
	}
	if err := checkVersion(h.V); err != nil {
		return nil, &DecodeError{What: "heartbeat", Err: err}
	}
	if err := ValidName(h.Agent); err != nil {
		return nil, &DecodeError{What: "heartbeat", Err: fmt.Errorf("field agent: %w", err)}
	}
	return &h, nil
}

// ValidName checks a campaign or agent name: 1 to 64 characters of
// [A-Za-z0-9_-], so it can be a subject token and a key.
func ValidName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("name %q must have 1 to 64 characters", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name %q: character %q is not one of A-Z a-z 0-9 _ -", s, c)
		}
	}
	return nil
}
