package mutbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// RunMany runs the benchmark once per seed and mode (for each seed every
// mode in turn, so that the modes meet the same machine), each run in
// cfg.Workdir/seed-N-MODE, and appends every row's Record to
// cfg.Workdir/results.jsonl. A row that file already holds a result of
// (a benchmark interrupted, or spread over sessions, and run again) is
// not run again, and a line says so. It ends with Spread of the file.
func RunMany(ctx context.Context, cfg Config, seeds []uint64, modes []string, w io.Writer) ([]Record, error) {
	if len(seeds) == 0 || len(modes) == 0 {
		return nil, errors.New("no seed or no mode to run")
	}
	for _, mode := range modes {
		if err := SetMode(&cfg, mode); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(cfg.Workdir, ResultsFile)
	kept, err := readKept(path)
	if err != nil {
		return nil, err
	}
	for _, seed := range seeds {
		for _, mode := range modes {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			run := cfg
			run.Seed = seed
			SetMode(&run, mode) // checked above
			run.Workdir = filepath.Join(cfg.Workdir, fmt.Sprintf("seed-%d-%s", seed, mode))
			run.Results = path
			run.Mutants = nil
			for _, m := range cfg.Mutants {
				if !kept[key{seed, mode, m.Name}] {
					run.Mutants = append(run.Mutants, m)
				}
			}
			run.Baseline = cfg.Baseline && !kept[key{seed, mode, Baseline}]
			skipped := len(cfg.Mutants) - len(run.Mutants)
			if cfg.Baseline && !run.Baseline {
				skipped++
			}
			if skipped > 0 {
				fmt.Fprintf(w, "mutbench: seed %d, %s: %d rows already in %s, not run again\n", seed, mode, skipped, path)
			}
			if len(run.Mutants) == 0 && !run.Baseline {
				continue
			}
			fmt.Fprintf(w, "mutbench: seed %d, %s, in %s\n", seed, mode, run.Workdir)
			Run(ctx, run, w)
		}
	}
	recs, err := LoadRecords([]string{path})
	if err != nil {
		return nil, err
	}
	fmt.Fprint(w, Spread(recs))
	return Latest(recs), nil
}

// readKept reads which row runs the results file at path holds a result
// of (a record without an error); no file: none.
func readKept(path string) (map[key]bool, error) {
	kept := map[key]bool{}
	recs, err := LoadRecords([]string{path})
	if errors.Is(err, fs.ErrNotExist) {
		return kept, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Err == "" {
			kept[key{r.Seed, r.Mode, r.Mutant}] = true
		}
	}
	return kept, nil
}

// AllClean reports whether every mutant run in recs (Latest of them) was
// found and every baseline run stayed clean, with no row failing.
func AllClean(recs []Record) bool {
	for _, r := range Latest(recs) {
		if r.Err != "" || (r.Mutant == Baseline) == r.Found {
			return false
		}
	}
	return len(recs) > 0
}
