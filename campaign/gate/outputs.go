package gate

import (
	"errors"
	"io"
)

// Outputs are the files a gate's Result is written to besides JUnit and
// the JSON summary ("" skips one).
type Outputs struct {
	// KCIDB is a KernelCI KCIDB (I/O schema v5) submission, with KCIDBOpts.
	KCIDB     string
	KCIDBOpts KCIDBOptions
	// KTAP is the kselftest format: one line per oracle family and per
	// finding group.
	KTAP string
	// BaselineTable is the baseline diff as a Markdown table with run
	// counts on both kernels.
	BaselineTable string
}

// WriteOutputs writes r to every file o names (each through a temporary
// file renamed into place).
func (r *Result) WriteOutputs(o Outputs) error {
	var errs []error
	if o.KCIDB != "" {
		errs = append(errs, writeAtomic(o.KCIDB, func(w io.Writer) error { return WriteKCIDB(w, r, o.KCIDBOpts) }))
	}
	if o.KTAP != "" {
		errs = append(errs, writeAtomic(o.KTAP, func(w io.Writer) error { return WriteKTAP(w, r) }))
	}
	if o.BaselineTable != "" {
		errs = append(errs, writeAtomic(o.BaselineTable, func(w io.Writer) error {
			_, err := io.WriteString(w, BaselineTable(r))
			return err
		}))
	}
	return errors.Join(errs...)
}

// Validate checks o's options before a gate runs (a bad KCIDB origin or
// build id is an error at once, not after the budget was spent).
func (o Outputs) Validate() error {
	if o.KCIDB == "" {
		return nil
	}
	opts := o.KCIDBOpts
	return opts.fill(&Result{})
}
