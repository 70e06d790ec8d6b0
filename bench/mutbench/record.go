package mutbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// The modes a row can run in (Config.Blind, Config.NoStates, Config.CoverEvery).
const (
	// Guided: KCOV edges and memory states, KCOV on every program (the
	// guided default until the thirty-third session; every earlier
	// record's guided).
	Guided = "guided"
	Blind  = "blind" // coverage measured, not used
	Edges  = "edges" // guided by KCOV edges only
	// Sampled: guided, KCOV on one fresh program in SampledCoverEvery
	// and on every corpus mutation (campaign.Config.CoverFor): a guided
	// campaign's default.
	Sampled = "sampled"
)

// SampledCoverEvery is the Sampled mode's campaign.Config.CoverEvery.
const SampledCoverEvery = campaign.DefaultGuidedCoverEvery

// Modes are the modes Record.Mode may name, in table order.
var Modes = []string{Guided, Blind, Edges, Sampled}

// ResultsFile is the name of the file in a benchmark's workdir that keeps
// one Record per row run, a JSON object per line.
const ResultsFile = "results.jsonl"

// Record is one row of one run as ResultsFile keeps it. A benchmark over
// several seeds and modes is many runs, possibly over several sessions:
// RunMany resumes from the records, and Spread reads them back.
type Record struct {
	Seed       uint64  `json:"seed"`
	Mode       string  `json:"mode"`
	Mutant     string  `json:"mutant"` // a kernel.Mutants name, or Baseline
	Found      bool    `json:"found"`
	Findings   int64   `json:"findings"`
	Seconds    float64 `json:"seconds"` // to the first finding; not found: the campaign's length
	Programs   int64   `json:"programs"`
	BudgetS    float64 `json:"budget_s"`
	OrigOps    int     `json:"orig_ops,omitempty"`
	MinOps     int     `json:"min_ops,omitempty"`
	Reproduced int     `json:"reproduced,omitempty"`
	Replays    int     `json:"replays,omitempty"`
	Oracle     string  `json:"oracle,omitempty"`
	Signature  string  `json:"signature,omitempty"`
	Err        string  `json:"error,omitempty"` // the row could not run
	Date       string  `json:"date,omitempty"`  // when it ended, RFC 3339
}

// ModeOf names the mode cfg runs in.
func ModeOf(cfg Config) string {
	switch {
	case cfg.Blind:
		return Blind
	case cfg.NoStates:
		return Edges
	case cfg.CoverEvery == 1:
		return Guided
	}
	return Sampled // the guided default
}

// SetMode sets cfg's Blind, NoStates and CoverEvery for mode.
func SetMode(cfg *Config, mode string) error {
	cfg.CoverEvery = 0
	switch mode {
	case Guided:
		cfg.Blind, cfg.NoStates, cfg.CoverEvery = false, false, 1
	case Blind:
		cfg.Blind, cfg.NoStates = true, false
	case Edges:
		cfg.Blind, cfg.NoStates, cfg.CoverEvery = false, true, 1
	case Sampled:
		cfg.Blind, cfg.NoStates, cfg.CoverEvery = false, false, SampledCoverEvery
	default:
		return fmt.Errorf("unknown mode %q (want %s)", mode, strings.Join(Modes, ", "))
	}
	return nil
}

// Record is r as ResultsFile keeps it, for a run of cfg.
func (r Result) Record(cfg Config) Record {
	rec := Record{
		Seed: cfg.Seed, Mode: ModeOf(cfg), Mutant: r.Name, Found: r.Found, Findings: r.Findings,
		Seconds: r.Time.Seconds(), Programs: r.Programs, BudgetS: cfg.Budget.Seconds(),
		OrigOps: r.OrigOps, MinOps: r.MinOps, Reproduced: r.Reproduced, Replays: r.Replays,
		Oracle: r.Oracle, Signature: r.Signature, Date: time.Now().UTC().Format(time.RFC3339),
	}
	if r.Err != nil {
		rec.Err = r.Err.Error()
	}
	return rec
}

// appendRecord adds rec to the results file at path.
func appendRecord(path string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// ReadRecords reads a results file's records; name (the file's path)
// prefixes errors, which name the line and the field. Blank lines are
// skipped.
func ReadRecords(r io.Reader, name string) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, jsonField(err))
		}
		if err := rec.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return recs, nil
}

// jsonField turns a decoding error into one that names the field.
func jsonField(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("field %q: want a %s, got %s", te.Field, te.Type, te.Value)
	}
	return err
}

// check validates one record's fields.
func (rec Record) check() error {
	switch {
	case rec.Seed == 0:
		return errors.New(`field "seed": missing or 0`)
	case !slices.Contains(Modes, rec.Mode):
		return fmt.Errorf(`field "mode": %q, want one of %s`, rec.Mode, strings.Join(Modes, ", "))
	case rec.Mutant != Baseline && !isMutant(rec.Mutant):
		return fmt.Errorf(`field "mutant": %q is no mutant of kernel/mutants`, rec.Mutant)
	case rec.Seconds < 0 || rec.Seconds > 1e9:
		return fmt.Errorf(`field "seconds": %v out of range`, rec.Seconds)
	case rec.BudgetS < 0 || rec.BudgetS > 1e9:
		return fmt.Errorf(`field "budget_s": %v out of range`, rec.BudgetS)
	case rec.Programs < 0:
		return fmt.Errorf(`field "programs": %d is negative`, rec.Programs)
	case rec.Findings < 0:
		return fmt.Errorf(`field "findings": %d is negative`, rec.Findings)
	}
	return nil
}

func isMutant(name string) bool {
	return slices.ContainsFunc(kernel.Mutants, func(m kernel.Mutant) bool { return m.Name == name })
}

// LoadRecords reads the records of each path: a results file, or a
// directory holding one (a benchmark's workdir).
func LoadRecords(paths []string) ([]Record, error) {
	var all []Record
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, ResultsFile)
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		recs, err := ReadRecords(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	return all, nil
}
