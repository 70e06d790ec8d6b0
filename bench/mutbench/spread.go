package mutbench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/kernel"
)

// key names one row run: a mutant hunted with one seed in one mode.
type key struct {
	seed   uint64
	mode   string
	mutant string
}

// Latest keeps, of records that repeat a row run (a resumed benchmark
// reruns rows that failed), the last one that ran, else the last one.
func Latest(recs []Record) []Record {
	idx := map[key]int{}
	var out []Record
	for _, r := range recs {
		k := key{r.Seed, r.Mode, r.Mutant}
		i, ok := idx[k]
		switch {
		case !ok:
			idx[k] = len(out)
			out = append(out, r)
		case r.Err == "" || out[i].Err != "":
			out[i] = r
		}
	}
	return out
}

// outcome is one run's distance to its mutant: programs and seconds to
// the first finding, or, not found, the whole run's (a lower bound).
type outcome struct {
	found    bool
	programs int64
	seconds  float64
}

// byPrograms and bySeconds order outcomes: not found after every found.
func byPrograms(a, b outcome) int {
	return cmp.Or(foundFirst(a, b), cmp.Compare(a.programs, b.programs))
}

func bySeconds(a, b outcome) int {
	return cmp.Or(foundFirst(a, b), cmp.Compare(a.seconds, b.seconds))
}

// foundFirst orders a found outcome before one not found (0: both alike).
func foundFirst(a, b outcome) int {
	switch {
	case a.found == b.found:
		return 0
	case a.found:
		return -1
	}
	return 1
}

// stat is the median and range of outcomes under an order, as text: a
// value from a run that did not find the mutant is a lower bound (">").
// When some runs found it and some did not, the range is that of the runs
// that found it, then the largest bound ("12-17, >110"): the order puts
// every miss after every find, so a plain range would end at a bound and
// hide a find that took longer.
func stat(outs []outcome, order func(a, b outcome) int, show func(outcome) string) string {
	if len(outs) == 0 {
		return "-"
	}
	s := slices.Clone(outs)
	slices.SortFunc(s, order)
	v := func(o outcome) string {
		if !o.found {
			return ">" + show(o)
		}
		return show(o)
	}
	// The lower middle for an even count: a median that is a bound
	// stays one.
	med := v(s[(len(s)-1)/2])
	if len(s) == 1 {
		return med
	}
	found := 0
	for found < len(s) && s[found].found {
		found++
	}
	if found == 0 || found == len(s) {
		return fmt.Sprintf("%s (%s-%s)", med, v(s[0]), v(s[len(s)-1]))
	}
	r := show(s[0])
	if found > 1 {
		r += "-" + show(s[found-1])
	}
	return fmt.Sprintf("%s (%s, %s)", med, r, v(s[len(s)-1]))
}

func showPrograms(o outcome) string { return fmt.Sprint(o.programs) }

func showSeconds(o outcome) string {
	return (time.Duration(o.seconds * float64(time.Second))).Round(time.Second).String()
}

// Spread is the benchmark over every seed and mode of recs (Latest of
// them): per mutant and mode how many runs found it, the median and range
// of programs and time to it; per mode the total over each seed that ran
// every mutant; and which mode needed fewer programs on how many rows.
func Spread(recs []Record) string {
	recs = Latest(recs)
	var b strings.Builder
	modes := presentModes(recs)
	mutants := presentMutants(recs)
	fmt.Fprintf(&b, "%d row runs; seeds per mode: %s\n", len(recs), seedsPerMode(recs, modes))
	fmt.Fprintf(&b, "%-21s %-7s %-11s %-26s %s\n", "MUTANT", "MODE", "FOUND", "PROGRAMS median (range)", "TIME median (range)")
	medProg := map[[2]string]outcome{}
	for _, m := range mutants {
		name := m // on the mutant's first line only
		for _, mode := range modes {
			outs, errs := outcomes(recs, mode, m)
			if len(outs) == 0 && errs == 0 {
				continue
			}
			found := 0
			for _, o := range outs {
				if o.found {
					found++
				}
			}
			f := fmt.Sprintf("%d/%d", found, len(outs))
			if errs > 0 {
				f += fmt.Sprintf(" (%d err)", errs)
			}
			fmt.Fprintf(&b, "%-21s %-7s %-11s %-26s %s\n", name, mode, f, stat(outs, byPrograms, showPrograms), stat(outs, bySeconds, showSeconds))
			name = ""
			if len(outs) > 0 {
				s := slices.Clone(outs)
				slices.SortFunc(s, byPrograms)
				medProg[[2]string{m, mode}] = s[(len(s)-1)/2]
			}
		}
	}
	for _, mode := range modes {
		b.WriteString(totals(recs, mode, mutants))
	}
	b.WriteString(compareModes(modes, mutants, medProg))
	b.WriteString(baselines(recs, modes))
	return b.String()
}

// totals is mode's line: over each seed that ran every mutant of the
// table, the programs and time to all of them (a run that did not find
// its mutant adds its whole length, and the total is then a bound).
func totals(recs []Record, mode string, mutants []string) string {
	per := map[uint64][]Record{}
	for _, r := range recs {
		if r.Mode == mode && r.Mutant != Baseline && r.Err == "" {
			per[r.Seed] = append(per[r.Seed], r)
		}
	}
	var tot []outcome
	found, runs := 0, 0
	for _, rs := range per {
		if len(rs) != len(mutants) {
			continue // a seed that did not run every mutant
		}
		o := outcome{found: true}
		for _, r := range rs {
			runs++
			if r.Found {
				found++
			} else {
				o.found = false
			}
			o.programs += r.Programs
			o.seconds += r.Seconds
		}
		tot = append(tot, o)
	}
	if len(tot) == 0 {
		return fmt.Sprintf("total %-7s no seed ran all %d mutants\n", mode, len(mutants))
	}
	return fmt.Sprintf("total %-7s over %d seeds that ran all %d mutants: found %d of %d; per seed, programs %s, time %s\n",
		mode, len(tot), len(mutants), found, runs, stat(tot, byPrograms, showPrograms), stat(tot, bySeconds, showSeconds))
}

// compareModes says, for each pair of modes, on how many mutants each
// needed fewer programs (median).
func compareModes(modes, mutants []string, med map[[2]string]outcome) string {
	var b strings.Builder
	for i, a := range modes {
		for _, c := range modes[i+1:] {
			wa, wc, tie := 0, 0, 0
			for _, m := range mutants {
				oa, okA := med[[2]string{m, a}]
				oc, okC := med[[2]string{m, c}]
				if !okA || !okC {
					continue
				}
				switch byPrograms(oa, oc) {
				case -1:
					wa++
				case 1:
					wc++
				default:
					tie++
				}
			}
			fmt.Fprintf(&b, "median programs: %s fewer on %d mutants, %s on %d, %d tied\n", a, wa, c, wc, tie)
		}
	}
	return b.String()
}

// baselines is the unmutated build's line per mode.
func baselines(recs []Record, modes []string) string {
	var b strings.Builder
	for _, mode := range modes {
		runs, findings, progs := 0, int64(0), int64(0)
		for _, r := range recs {
			if r.Mode == mode && r.Mutant == Baseline && r.Err == "" {
				runs++
				findings += r.Findings
				progs += r.Programs
			}
		}
		if runs > 0 {
			fmt.Fprintf(&b, "unmutated build, %s: %d findings in %d runs (%d programs)\n", mode, findings, runs, progs)
		}
	}
	return b.String()
}

// outcomes are mode's runs of mutant, and how many could not run.
func outcomes(recs []Record, mode, mutant string) (outs []outcome, errs int) {
	for _, r := range recs {
		if r.Mode != mode || r.Mutant != mutant {
			continue
		}
		if r.Err != "" {
			errs++
			continue
		}
		outs = append(outs, outcome{r.Found, r.Programs, r.Seconds})
	}
	return outs, errs
}

// presentModes are the modes recs ran, in Modes order.
func presentModes(recs []Record) []string {
	var out []string
	for _, m := range Modes {
		if slices.ContainsFunc(recs, func(r Record) bool { return r.Mode == m }) {
			out = append(out, m)
		}
	}
	return out
}

// presentMutants are the mutants recs hunted, in catalogue order.
func presentMutants(recs []Record) []string {
	var out []string
	for _, m := range kernel.Mutants {
		if slices.ContainsFunc(recs, func(r Record) bool { return r.Mutant == m.Name }) {
			out = append(out, m.Name)
		}
	}
	return out
}

// seedsPerMode lists each mode's seeds.
func seedsPerMode(recs []Record, modes []string) string {
	var parts []string
	for _, mode := range modes {
		var seeds []uint64
		for _, r := range recs {
			if r.Mode == mode && !slices.Contains(seeds, r.Seed) {
				seeds = append(seeds, r.Seed)
			}
		}
		slices.Sort(seeds)
		parts = append(parts, fmt.Sprintf("%s %v", mode, seeds))
	}
	return strings.Join(parts, ", ")
}
