package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
)

var reproRE = regexp.MustCompile(`reproduced (\d+)/(\d+) replays`)

// collect reads every finding from the workdir: what is on disk is what
// was seen, whether or not its minimization finished.
func (g *gate) collect() {
	root := filepath.Join(g.cfg.Workdir, "findings")
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		f, err := readFinding(dir)
		if err != nil {
			g.res.Warnings = append(g.res.Warnings, err.Error())
			continue
		}
		f.Source = "fuzz"
		if n, ok := g.corpusF[f.Signature]; ok {
			f.Source = "corpus:" + n
		}
		repro := f.Program
		if f.Minimized != "" {
			repro = f.Minimized
		}
		f.Replay = g.replayCmd(repro, false, f.RunMode)
		f.Faults = faultsOf(f.reproProg)
		g.res.Findings = append(g.res.Findings, *f)
	}
	sort.Slice(g.res.Findings, func(i, j int) bool { return g.res.Findings[i].Signature < g.res.Findings[j].Signature })
}

func readFinding(dir string) (*FindingRecord, error) {
	sb, err := os.ReadFile(filepath.Join(dir, "signature"))
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", dir, err)
	}
	f := &FindingRecord{Signature: strings.TrimSpace(string(sb)), Dir: dir, Program: filepath.Join(dir, "program.ffz")}
	f.Oracle = string(oracle.FromSignature(f.Signature))
	// A finding carries its oracle as data (report.json) where saved.
	if b, err := fsutil.ReadFileLimited(filepath.Join(dir, "report.json"), 1<<20); err == nil {
		var m struct {
			Oracle     string `json:"oracle"`
			ReplayRuns []struct {
				Outcome string `json:"outcome"`
			} `json:"replay_runs"`
		}
		if json.Unmarshal(b, &m) == nil && m.Oracle != "" {
			f.Oracle = m.Oracle
		}
		for _, r := range m.ReplayRuns {
			f.addShowed(campaign.OutcomeShowed(r.Outcome))
		}
	}
	f.origProg, err = readProg(f.Program)
	if err != nil {
		return nil, err
	}
	f.OriginalOps = len(f.origProg.Ops)
	f.reproProg = f.origProg
	mp := filepath.Join(dir, "minimized.ffz")
	if p, err := readProg(mp); err == nil {
		f.Minimized, f.reproProg, f.MinimizedOps = mp, p, len(p.Ops)
	}
	f.RunMode = seedMode(dir)
	f.sites = reproSites(dir, f)
	if b, err := os.ReadFile(filepath.Join(dir, "report.txt")); err == nil {
		// The last count is the finding's: one before it may be another
		// program's (a minimized program dropped for replaying 0/N).
		if all := reproRE.FindAllSubmatch(b, -1); all != nil {
			m := all[len(all)-1]
			f.Reproduced, _ = strconv.Atoi(string(m[1]))
			f.Replays, _ = strconv.Atoi(string(m[2]))
		}
		f.Explanation = string(b)
	}
	return f, nil
}

// enrich re-judges the recorded observations of the findings for the
// evidence (the first bad process, op, page) and the explanation of each
// signature, until deadline; it returns how many it did.
func (g *gate) enrich(deadline time.Time) int {
	type key struct{ prog, obs string }
	type val struct {
		is   *checker.Finding
		sigs []string
	}
	cache := map[key]map[string]val{}
	check := func(p *prog.Program, obsPath, sig string) (*checker.Finding, []string) {
		b, err := os.ReadFile(obsPath)
		if err != nil {
			return nil, nil
		}
		h := sha256.Sum256(b)
		k := key{progHash(p), string(h[:])}
		if m, ok := cache[k]; ok {
			return m[sig].is, m[sig].sigs
		}
		m := map[string]val{}
		cache[k] = m
		cv := rejudge(p, b)
		if cv == nil {
			return nil, nil
		}
		var sigs []string
		for i := range cv.Findings {
			sigs = append(sigs, cv.Findings[i].Signature)
		}
		sort.Strings(sigs)
		for i := range cv.Findings {
			f := &cv.Findings[i]
			if _, ok := m[f.Signature]; !ok {
				m[f.Signature] = val{f, sigs}
			}
		}
		return m[sig].is, m[sig].sigs
	}
	n := 0
	for i := range g.res.Findings {
		if time.Now().After(deadline) {
			g.res.Warnings = append(g.res.Warnings, fmt.Sprintf("budget spent: %d of %d findings not re-judged for evidence; grouped by program only", len(g.res.Findings)-n, len(g.res.Findings)))
			break
		}
		f := &g.res.Findings[i]
		n++
		if is, _ := check(f.origProg, filepath.Join(f.Dir, "observation.json"), f.Signature); is != nil {
			f.origEv = is
			f.Oracle = string(is.Oracle)
			f.Explanation = is.String()
			f.Evidence = is
		}
		if f.Minimized != "" {
			if is, sigs := check(f.reproProg, filepath.Join(f.Dir, "minimized-observation.json"), f.Signature); is != nil {
				f.reproSigs = sigs
				f.Evidence = is
				f.Explanation = is.String()
			}
		}
	}
	return n
}

func readProg(path string) (*prog.Program, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("finding: %w", err)
	}
	return corpus.ParseFile(path, b)
}

// rejudge checks a recorded observation of p again (checker.Check, as
// judge.Judge does, without judge's porcupine visualization).
func rejudge(p *prog.Program, b []byte) *checker.Verdict {
	var o obs.Observation
	if json.Unmarshal(b, &o) != nil || len(o.Ops) != len(p.Ops) {
		return nil
	}
	return checker.Check(p, &o)
}

// reproSites returns where the recorded run of f's reproducer injected
// its forks' faults: from the minimized program's observation, or from
// the original's when the reproducer has the same operations (an aimed
// program differs only in fail_nth); nil without a fork with fail_nth.
func reproSites(dir string, f *FindingRecord) campaign.Sites {
	var files []string
	if f.Minimized != "" {
		files = append(files, "minimized-observation.json")
	}
	if len(f.reproProg.Ops) == len(f.origProg.Ops) {
		files = append(files, "observation.json")
	}
	for _, name := range files {
		if s := obsSites(filepath.Join(dir, name), f.reproProg); s != nil {
			return s
		}
	}
	return nil
}

// addShowed records sig ("" for none) as one f's replays showed, unless
// it is f's own or harness trouble.
func (f *FindingRecord) addShowed(sig string) {
	if sig == "" || sig == f.Signature || slices.Contains(f.ReplayShowed, sig) {
		return
	}
	if trouble, _ := troubleKind(sig); trouble {
		return
	}
	f.ReplayShowed = append(f.ReplayShowed, sig)
}

// obsSites returns where the faults injected into p's forks hit in the
// run whose observation file is path (campaign.AimSites); nil if p
// injects none, or the file is missing or is not a run of p.
func obsSites(path string, p *prog.Program) campaign.Sites {
	if len(p.Injected()) == 0 && len(p.ChildInjected()) == 0 {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var o obs.Observation
	if json.Unmarshal(b, &o) != nil || len(o.Ops) != len(p.Ops) {
		return nil
	}
	return campaign.AimSites(&o)
}

func progHash(p *prog.Program) string {
	s := sha256.Sum256(p.Format())
	return hex.EncodeToString(s[:8])
}
