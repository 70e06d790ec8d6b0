package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/version"
)

// corpusEntries lists the programs to replay, in order: earlier
// findings, regression directories, seeds.
func (g *gate) corpusEntries(ph *Phase) []CorpusCase {
	var cs []CorpusCase
	var notes []string
	// Earlier findings first (has an old bug come back?), then the
	// regression programs, then the seeds: what the replay share cuts
	// off last matters least.
	for _, d := range g.cfg.ReplayFindings {
		fs, err := findingPrograms(d)
		if err != nil {
			notes = append(notes, err.Error())
			if ph.Error == "" {
				ph.Error = err.Error()
			}
		}
		cs = append(cs, fs...)
	}
	addDir := func(dir string, optional bool) {
		if _, err := os.Stat(dir); err != nil && optional {
			// A default directory (corpus/regress, corpus/rollback) not
			// here (a gate run from a kernel tree): the copy built
			// into this forkfuzz.
			if files := corpus.RegressionFiles(filepath.Base(dir)); len(files) > 0 {
				cs2, err := loadRegressEmbedded(files)
				if err != nil {
					notes = append(notes, err.Error())
				}
				notes = append(notes, fmt.Sprintf("corpus directory %s not found: replayed the copy built into forkfuzz %s (%d files)", dir, version.String(), len(files)))
				cs = append(cs, cs2...)
				return
			}
			notes = append(notes, fmt.Sprintf("corpus directory %s not found, not replayed", dir))
			return
		}
		cs2, err := loadRegress(dir)
		if err != nil {
			notes = append(notes, err.Error())
			if ph.Error == "" && !optional {
				ph.Error = err.Error()
			}
		}
		cs = append(cs, cs2...)
	}
	for _, d := range g.cfg.CorpusDirs {
		addDir(d, false)
	}
	for _, d := range g.cfg.OptionalCorpusDirs {
		addDir(d, true)
	}
	for _, e := range corpus.Seeds() {
		cs = append(cs, CorpusCase{Name: "seeds/" + e.Name, Source: "seeds", Path: "(embedded) corpus/seeds/" + e.Name, prog: e.Prog})
	}
	ph.Note = strings.Join(notes, "\n")
	return cs
}

// loadRegress reads the *.ffz files of a regression directory; a file
// may hold several programs separated by lines "====" (as
// corpus/regress does); each is one case, "DIR/FILE#N" from the second on.
func loadRegress(dir string) ([]CorpusCase, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"+corpus.Ext))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	src := filepath.Base(dir)
	var cs []CorpusCase
	var errs []error
	for _, f := range files {
		b, err := fsutil.ReadFileLimited(f, corpus.MaxFileSize)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := regressCases(src, f, f, b)
		cs = append(cs, c...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(files) == 0 {
		errs = append(errs, fmt.Errorf("corpus: no %s files in %s", corpus.Ext, dir))
	}
	return cs, errors.Join(errs...)
}

// loadRegressEmbedded is loadRegress over the regression files built into
// the binary (corpus.RegressionFiles).
func loadRegressEmbedded(files []corpus.RegressionFile) ([]CorpusCase, error) {
	var cs []CorpusCase
	var errs []error
	for _, f := range files {
		c, err := regressCases(f.Dir, "corpus/"+f.Dir+"/"+f.Name, "(embedded) corpus/"+f.Dir+"/"+f.Name, f.Text)
		cs = append(cs, c...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return cs, errors.Join(errs...)
}

// regressCases splits one regression file (programs separated by lines
// "====") into cases named SRC/FILE, SRC/FILE#2, ...; errors name the
// file's line.
func regressCases(src, f, path string, b []byte) ([]CorpusCase, error) {
	ps, err := corpus.FilePrograms(f, b)
	var cs []CorpusCase
	for _, fp := range ps {
		name := src + "/" + filepath.Base(f)
		if fp.N > 1 {
			name += fmt.Sprintf("#%d", fp.N)
		}
		cs = append(cs, CorpusCase{Name: name, Source: src, Path: path, prog: fp.Prog, Sites: campaign.DirectiveSites(fp.Sites).List()})
	}
	return cs, err
}

// findingPrograms finds earlier findings under dir (a workdir, its
// findings/ directory, or one finding directory).
func findingPrograms(dir string) ([]CorpusCase, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--replay-findings: %w", err)
	}
	var cs []CorpusCase
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".saving-") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		for _, name := range []string{"minimized.ffz", "program.ffz"} {
			pf := filepath.Join(path, name)
			b, err := fsutil.ReadFileLimited(pf, corpus.MaxFileSize)
			if err != nil {
				continue
			}
			p, err := corpus.ParseFile(pf, b)
			if err != nil {
				errs = append(errs, err)
				break
			}
			m := seedMode(path)
			obsFile := map[string]string{"minimized.ffz": "minimized-observation.json", "program.ffz": "observation.json"}[name]
			cs = append(cs, CorpusCase{Name: "finding/" + filepath.Base(path), Source: "finding", Path: pf, prog: p, Cover: !m.NoCover, NoCensus: m.NoCensus,
				Sites: obsSites(filepath.Join(path, obsFile), p).List()})
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(cs) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("--replay-findings %s: no finding directory (minimized.ffz or program.ffz) under it", dir))
	}
	return cs, errors.Join(errs...)
}

// RunMode is how a finding's run went where a campaign samples: without
// kernel coverage, without the page census at forks. The gate replays a
// finding the same way (both move a race's timing).
type RunMode struct {
	NoCover  bool `json:"no_cover,omitempty"`
	NoCensus bool `json:"no_census,omitempty"`
}

// options is the agents.Options of a replay in mode m.
func (m RunMode) options(corrupt string) agents.Options {
	return agents.Options{Corrupt: corrupt, NoCover: m.NoCover, NoForkPages: m.NoCensus}
}

// Flags are `forkfuzz exec`'s flags for mode m.
func (m RunMode) Flags() []string {
	var f []string
	if m.NoCover {
		f = append(f, "--no-cover")
	}
	if m.NoCensus {
		f = append(f, "--no-census")
	}
	return f
}

// seedMode reads how the run of the finding in directory dir went (its
// seed file, campaign.Finding.ReadSeed); no seed file: collecting and
// taking the census, the targets' default.
func seedMode(dir string) RunMode {
	b, err := fsutil.ReadFileLimited(filepath.Join(dir, "seed"), 1<<16)
	if err != nil {
		return RunMode{}
	}
	var f campaign.Finding
	f.ReadSeed(b)
	return RunMode{NoCover: f.NoCover, NoCensus: f.NoCensus}
}

func (g *gate) replay(ph *Phase, share time.Duration, tally *judge.Tally) {
	stop := time.Now().Add(share)
	cs := g.corpusEntries(ph)
	if ph.Error != "" {
		return
	}
	g.tut.setStop(g.hard)
	ran, failed, skipped := 0, 0, 0
	for i := range cs {
		c := &cs[i]
		if g.ctx.Err() != nil || time.Now().After(stop) {
			c.Status = "skipped"
			c.Note = "corpus replay share of the budget spent"
			if g.ctx.Err() != nil {
				c.Note = "interrupted"
			}
			skipped++
			continue
		}
		t0 := time.Now()
		p, o, v, herr, skip := g.corpusRun(c, stop)
		c.Duration = time.Since(t0)
		c.Seconds = c.Duration.Seconds()
		if skip != "" {
			c.Status, c.Note = "skipped", skip
			skipped++
			continue
		}
		if herr != nil {
			c.Status, c.Note = "harness-error", herr.Error()
			if errors.Is(herr, errBudget) {
				c.Status, c.Note = "skipped", "budget spent"
				skipped++
				continue
			}
			if agents.Refused(herr) {
				c.Status, c.Note = "skipped", "refused by the target: "+herr.Error()
				skipped++
				continue
			}
			g.res.HarnessErrors++
			continue
		}
		ran++
		g.res.CorpusPrograms++
		g.res.Forks += int64(p.NumForks())
		tally.Add(v)
		c.Judged = v.Summary()
		if v.OK() {
			c.Status = "pass"
			continue
		}
		failed++
		c.Status = "fail"
		c.Signatures = v.Signatures()
		for _, sig := range c.Signatures {
			g.sigRuns[sig]++
		}
		var ex []string
		for _, is := range v.Issues {
			head := fmt.Sprintf("[%s] %s", is.Oracle, is.Signature)
			if strings.HasPrefix(is.Explanation, head) {
				ex = append(ex, is.Explanation) // checker findings name themselves
			} else {
				ex = append(ex, head+"\n"+is.Explanation)
			}
		}
		c.Explanation = strings.Join(ex, "\n\n")
		// Each new signature becomes a finding, saved at once.
		for _, is := range v.Issues {
			if g.store.Seen(is.Signature) {
				continue
			}
			f := &campaign.Finding{Issue: is, Program: p, Observation: o, Minimized: p, MinObs: o, MinIssue: is,
				Judged: v.Summary(), Target: g.tut.Name(), Corrupt: g.cfg.Corrupt, Replays: 1, Reproduced: 1,
				TargetArgs: g.res.Kernel.Flags, Kernel: g.kernelID(), Version: version.String(), NoCover: !c.Cover, NoCensus: c.NoCensus}
			if trouble, hang := troubleKind(is.Signature); trouble {
				// Harness trouble must happen again to count against
				// the kernel (classify): a death is replayed now, a
				// hang by the confirm phase with a longer timeout.
				f.Replays, f.Reproduced = 0, 0
				if !hang {
					g.replayEvent(f, p, is.Signature, corpusEventReplays)
				}
			}
			dir, err := g.store.Save(f)
			if err != nil {
				ph.Error = err.Error()
				return
			}
			g.corpusF[is.Signature] = c.Name
			c.Replay = g.replayCmd(filepath.Join(dir, "minimized.ffz"), false, c.mode())
			g.logf("corpus %s: new finding %s, saved %s", c.Name, is.Signature, dir)
		}
		if c.Replay == "" {
			c.Replay = g.replayCmd(c.Path, false, c.mode())
		}
	}
	g.res.Corpus = cs
	n := fmt.Sprintf("%d programs: %d ran (%d failed), %d skipped", len(cs), ran, failed, skipped)
	if ph.Note != "" {
		n += "\n" + ph.Note
	}
	ph.Note = n
}

// corpusRun runs corpus case c once and judges the run. A passing run
// that missed one of c's fault sites (campaign.Missed: the fault hit
// another allocation, or the fork met fewer failure points than its K)
// tested something else, and a pass would say the kernel passed a test
// it never ran: c's program is aimed at the sites (campaign.Aim, until
// the replay share's stop) and the aimed program p runs instead; if that
// run misses them too, skip says why and the case is not counted.
func (g *gate) corpusRun(c *CorpusCase, stop time.Time) (p *prog.Program, o *obs.Observation, v *judge.Verdict, herr error, skip string) {
	opt := c.mode().options(g.cfg.Corrupt)
	p = c.prog
	o, err := g.tut.Run(p, opt)
	v, herr = judge.Judge(p, o, err)
	sites := campaign.SitesOf(c.Sites)
	if herr != nil || !v.OK() || len(sites) == 0 {
		return p, o, v, herr, ""
	}
	missed := campaign.Missed(o, sites)
	if len(missed) == 0 {
		return p, o, v, herr, ""
	}
	c.OffSite++
	ctx, cancel := context.WithDeadline(g.ctx, stop)
	defer cancel()
	a := campaign.AimJudged(ctx, g.tut, p, sites, opt, campaign.AimRuns)
	c.Note = fmt.Sprintf("the run missed the fault site (%s); aimed: %s", strings.Join(missed, "; "), a.Note)
	if f := a.Failed; f != nil {
		// A run of the kernel under test showed an issue while aiming:
		// it is the case's run, whether or not its fault was on the site.
		if f.Prog != p {
			c.Aimed = string(f.Prog.Format())
		}
		return f.Prog, f.Obs, f.Verdict, nil, ""
	}
	q := a.Prog
	o, err = g.tut.Run(q, opt)
	v, herr = judge.Judge(q, o, err)
	if herr == nil && v.OK() {
		if m := campaign.Missed(o, sites); len(m) > 0 {
			c.OffSite++
			return q, o, v, nil, fmt.Sprintf("not exercised: %s; the aimed program's run missed it too (%s)", c.Note, strings.Join(m, "; "))
		}
	}
	if q != p {
		c.Aimed = string(q.Format())
	}
	return q, o, v, herr, ""
}

// corpusEventReplays is how often a corpus program that made the
// executor die or hang is replayed.
const corpusEventReplays = 3

// replayEvent runs p up to n times more (runs without a verdict, such as
// refused ones, are not counted) and records in f how often sig came
// back.
func (g *gate) replayEvent(f *campaign.Finding, p *prog.Program, sig string, n int) {
	for k := 0; k < 2*n && f.Replays < n && g.ctx.Err() == nil; k++ {
		t0 := time.Now()
		o, err := g.tut.Run(p, RunMode{NoCover: f.NoCover, NoCensus: f.NoCensus}.options(g.cfg.Corrupt))
		v, herr := judge.Judge(p, o, err)
		// Kept in report.json: what else a replay showed is judged too
		// (FindingRecord.ReplayShowed).
		f.ReplayRuns = append(f.ReplayRuns, campaign.NewReplayRun(sig, v, herr, time.Since(t0)))
		if herr != nil {
			f.ReplayErrors++
			continue
		}
		f.Replays++
		if back, _ := campaign.CameBack(sig, v); back {
			f.Reproduced++
		}
	}
}
