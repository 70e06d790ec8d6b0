package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// CampaignHTML is the campaign page's file name in a workdir.
const CampaignHTML = "index.html"

// FindingRow is one finding on the campaign page.
type FindingRow struct {
	Meta
	Dir   string // directory name under findings/
	Count int64  // failing runs that showed it (from the stats samples)
	First time.Time
	Last  time.Time
}

// AgentRow is one agent (or VM) on a live page.
type AgentRow struct {
	Name, Health, Target, Host string
	Busy, Workers              int
	Programs, Errors           int64
	LastSeen                   time.Duration
}

// Campaign is what the campaign page shows.
type Campaign struct {
	Title    string
	Workdir  string
	Samples  []campaign.Sample
	Findings []FindingRow
	Agents   []AgentRow
	// Status lines (a coordinator's queue, campaign states).
	Status []string
	// Refresh makes the page reload itself every that many seconds (live).
	Refresh int
	// Corpus describes the workdir's saved corpus, if any.
	Corpus []string
	// LinkPrefix goes before finding links ("findings/").
	LinkPrefix string
	// Warnings say what the page lacks: finding directories skipped,
	// malformed lines of the stats file.
	Warnings []string
}

// LoadCampaign reads a workdir: its stats samples and finding directories
// (report.json where present, else the directory itself). A finding
// directory that cannot be read is left out with a warning (Warnings), as
// are malformed lines of the stats file.
func LoadCampaign(workdir string) (*Campaign, error) {
	c := &Campaign{Title: "forkfuzz campaign", Workdir: workdir, LinkPrefix: "findings/"}
	sr, err := campaign.ReadStats(workdir)
	if err != nil {
		return nil, err
	}
	c.Samples = sr.Samples
	if n := sr.Note(); n != "" {
		c.Warnings = append(c.Warnings, n)
	}
	var warns []string
	if c.Findings, warns, err = loadFindingRows(workdir, c.Samples); err != nil {
		return nil, err
	}
	c.Warnings = append(c.Warnings, warns...)
	c.Corpus = corpusLines(workdir)
	return c, nil
}

func loadFindingRows(workdir string, samples []campaign.Sample) ([]FindingRow, []string, error) {
	root := filepath.Join(workdir, "findings")
	ents, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	counts := sigCounts(samples)
	var rows []FindingRow
	var warns []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		var m Meta
		if b, err := readFindingFile(dir, FindingJSON); err == nil && json.Unmarshal(b, &m) == nil {
		} else {
			f, err := LoadFinding(dir)
			if err != nil {
				warns = append(warns, dirWarning(dir, "not listed", err))
				continue
			}
			m = MetaOf(f)
			if fi, err := os.Stat(filepath.Join(dir, "signature")); err == nil {
				m.Saved = fi.ModTime().UTC()
			}
		}
		r := FindingRow{Meta: m, Dir: e.Name(), First: m.Saved, Last: m.Saved}
		if sc := counts[m.Signature]; sc != nil {
			r.Count, r.First, r.Last = sc.Count, sc.First, sc.Last
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Oracle != rows[j].Oracle {
			return rows[i].Oracle < rows[j].Oracle
		}
		return rows[i].First.Before(rows[j].First)
	})
	return rows, warns, nil
}

// sigCounts adds up the last sample of every run.
func sigCounts(samples []campaign.Sample) map[string]*campaign.SigCount {
	last := map[string]campaign.Sample{}
	for _, s := range samples {
		last[s.Run] = s
	}
	out := map[string]*campaign.SigCount{}
	for _, s := range last {
		for sig, c := range s.Signatures {
			o := out[sig]
			if o == nil {
				cc := *c
				out[sig] = &cc
				continue
			}
			o.Count += c.Count
			if c.First.Before(o.First) {
				o.First = c.First
			}
			if c.Last.After(o.Last) {
				o.Last = c.Last
			}
		}
	}
	return out
}

// corpusLines describes workdir/corpus, where `run` keeps its corpus.
func corpusLines(workdir string) []string {
	ents, err := os.ReadDir(filepath.Join(workdir, "corpus"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		progs, _ := filepath.Glob(filepath.Join(workdir, "corpus", e.Name(), "*.ffz"))
		out = append(out, fmt.Sprintf("corpus/%s: %d programs", e.Name(), len(progs)))
	}
	return out
}

// runs splits samples by run, in time order.
func runs(samples []campaign.Sample) [][]campaign.Sample {
	idx := map[string]int{}
	var out [][]campaign.Sample
	for _, s := range samples {
		i, ok := idx[s.Run]
		if !ok {
			i = len(out)
			idx[s.Run] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], s)
	}
	return out
}

// forkMode says which fork implementation a target runs.
func forkMode(target, impl string) string {
	if impl != "" {
		return impl + " (--fork-impl, checked per fork) on the " + target + " target"
	}
	switch {
	case strings.HasPrefix(target, "sim-"):
		mode, mutant, _ := strings.Cut(strings.TrimPrefix(target, "sim-"), "+")
		if mutant != "" {
			return fmt.Sprintf("simulated %s fork with mutant %s", mode, mutant)
		}
		return "simulated " + mode + " fork"
	case target == "sim":
		return "the simulated kernel (each agent's --fork and --mutant)"
	case target == "native":
		return "the host kernel's fork"
	case target == "qemu":
		return "the guest kernel's fork"
	}
	return target
}

// CampaignPage renders the campaign page.
func CampaignPage(c *Campaign) []byte {
	var b html
	rs := runs(c.Samples)
	sub := fmt.Sprintf("%s · %d runs · updated %s", esc(c.Workdir), len(rs), time.Now().UTC().Format("2006-01-02 15:04:05 UTC"))
	if c.Refresh > 0 {
		sub += fmt.Sprintf(" · live, reloads every %ds", c.Refresh)
	}
	b.f(`<header><h1>%s</h1><div class="sub">%s</div></header><main>`, esc(c.Title), sub)
	if len(c.Warnings) > 0 {
		b.f(`<section id="warnings"><h2>Left out</h2>`)
		for _, w := range c.Warnings {
			b.f(`<p class="note warn">%s</p>`, esc(w))
		}
		b.f(`</section>`)
	}
	campaignSummary(&b, c, rs)
	campaignPlots(&b, c, rs)
	campaignAgents(&b, c)
	campaignFindings(&b, c)
	out := page(c.Title, b.HTML())
	if c.Refresh > 0 {
		out = []byte(strings.Replace(string(out), "<head>", fmt.Sprintf(`<head><meta http-equiv="refresh" content="%d">`, c.Refresh), 1))
	}
	return out
}

// campaignSummary writes the summary section: target, kernel, seeds and
// the totals of every run.
func campaignSummary(b *html, c *Campaign, rs [][]campaign.Sample) {
	var last campaign.Sample
	if len(c.Samples) > 0 {
		last = c.Samples[len(c.Samples)-1]
	}
	var programs, forks, events, harness int64
	var elapsed float64
	for _, r := range rs {
		l := r[len(r)-1]
		programs += l.Programs
		forks += l.Forks
		events += l.Events
		harness += l.HarnessErrors
		elapsed += l.Elapsed
	}
	b.f(`<section id="summary"><h2>Summary</h2><div class="kv">`)
	kv := func(k, v string) { b.f(`<div>%s</div><div>%s</div>`, esc(k), v) }
	if last.Target != "" {
		kv("target", esc(last.Target))
		kv("fork mode", esc(forkMode(last.Target, last.ForkImpl)))
		k := last.Kernel
		if k == "" {
			k = "not reported by the observations"
		} else {
			k = "Linux " + k
		}
		kv("kernel", esc(k))
		seeds := map[uint64]bool{}
		var ss []string
		for _, r := range rs {
			if !seeds[r[0].Seed] {
				seeds[r[0].Seed] = true
				ss = append(ss, fmt.Sprint(r[0].Seed))
			}
		}
		kv("seeds", esc(strings.Join(ss, ", ")))
	}
	rate := func(n int64) string {
		if elapsed <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.1f/s)", float64(n)/elapsed)
	}
	kv("programs", esc(fmt.Sprintf("%d%s", programs, rate(programs))))
	kv("forks", esc(fmt.Sprintf("%d%s", forks, rate(forks))))
	kv("failing runs", esc(fmt.Sprint(events)))
	kv("unique findings", esc(fmt.Sprint(len(c.Findings))))
	kv("harness errors", esc(fmt.Sprint(harness)))
	kv("time fuzzing", esc((time.Duration(elapsed) * time.Second).String()))
	for _, l := range c.Corpus {
		kv("corpus", esc(l))
	}
	for _, s := range c.Status {
		kv("status", esc(s))
	}
	b.f(`</div></section>`)
	if last.Spent != nil && last.Spent.Programs > 0 {
		b.f(`%s`, timeBar(last.Spent))
	}

}

// campaignPlots writes the plots over time: rates, findings, coverage.
func campaignPlots(b *html, c *Campaign, rs [][]campaign.Sample) {
	var progS, forkS, findS series
	progS = series{name: "programs/s", color: "#2e6fb7"}
	forkS = series{name: "forks/s", color: "#27ae60"}
	findS = series{name: "unique findings", color: "#c0392b"}
	failS := series{name: "failing runs", color: "#e67e22"}
	edgeS := series{name: "kernel edges", color: "#8e44ad"}
	mmS := series{name: "fork/mm PCs", color: "#16a085"}
	covered, every, rule := false, 0, ""
	var base int64
	for _, r := range rs {
		var ps, fs, ns, es, cs, ms []pt
		for i, s := range r {
			var dp, df, dt float64
			if i == 0 {
				dp, df, dt = float64(s.Programs), float64(s.Forks), s.Elapsed
			} else {
				dp, df, dt = float64(s.Programs-r[i-1].Programs), float64(s.Forks-r[i-1].Forks), s.Elapsed-r[i-1].Elapsed
			}
			if dt >= 1 {
				ps = append(ps, pt{s.Time, dp / dt})
				fs = append(fs, pt{s.Time, df / dt})
			}
			ns = append(ns, pt{s.Time, float64(base + s.Findings)})
			if s.Edges > 0 {
				covered, every = true, max(every, s.CoverEvery)
				if s.CoverRule != "" {
					rule = s.CoverRule
				}
				cs = append(cs, pt{s.Time, float64(s.Edges)})
				ms = append(ms, pt{s.Time, float64(s.ForkMMPCs)})
			}
			es = append(es, pt{s.Time, float64(s.Events)})
		}
		base += r[len(r)-1].Findings
		progS.segs = append(progS.segs, ps)
		forkS.segs = append(forkS.segs, fs)
		findS.segs = append(findS.segs, ns)
		failS.segs = append(failS.segs, es)
		edgeS.segs = append(edgeS.segs, cs)
		mmS.segs = append(mmS.segs, ms)
	}
	coverChart := ""
	if covered {
		coverChart = " " + lineChart("kernel coverage (KCOV)", []series{edgeS, mmS}, 600, 230)
	}
	b.f(`<section id="plots"><h2>Over time</h2><div class="scroll">%s %s%s</div>`,
		lineChart("programs and forks per second", []series{progS, forkS}, 600, 230),
		lineChart("findings", []series{findS, failS}, 600, 230), coverChart)
	switch {
	case len(c.Samples) == 0:
		b.f(`<p class="note">No samples in %s yet (a run writes one every %s).</p>`, campaign.StatsFile, campaign.StatsEvery)
	case !covered:
		b.f(`<p class="note">%d samples from %s; no coverage plot: this campaign collected no kernel coverage (no KCOV on its target).</p>`, len(c.Samples), campaign.StatsFile)
	case every > 1:
		if rule == "" { // samples written before they said the rule
			rule = fmt.Sprintf("one program in %d", every)
		}
		b.f(`<p class="note">%d samples from %s; kernel coverage sampled: %s (--cover-every).</p>`, len(c.Samples), campaign.StatsFile, esc(rule))
	default:
		b.f(`<p class="note">%d samples from %s.</p>`, len(c.Samples), campaign.StatsFile)
	}
	b.f(`</section>`)

}

// campaignAgents writes the table of the distributed campaign's agents.
func campaignAgents(b *html, c *Campaign) {
	if len(c.Agents) > 0 {
		b.f(`<section id="agents"><h2>Agents</h2><table><tr><th>agent</th><th>health</th><th>target</th><th>host</th><th class="num">busy / VMs or workers</th><th class="num">programs</th><th class="num">harness errors</th><th class="num">last heartbeat</th></tr>`)
		for _, a := range c.Agents {
			cls := ""
			if a.Health != "ok" {
				cls = ` class="warn"`
			}
			b.f(`<tr><td>%s</td><td%s>%s</td><td>%s</td><td>%s</td><td class="num">%d/%d</td><td class="num">%d</td><td class="num">%d</td><td class="num">%s ago</td></tr>`,
				esc(a.Name), cls, esc(a.Health), esc(a.Target), esc(a.Host), a.Busy, a.Workers, a.Programs, a.Errors, a.LastSeen.Round(100*time.Millisecond))
		}
		b.f(`</table></section>`)
	}

}

// campaignFindings writes the findings, grouped.
func campaignFindings(b *html, c *Campaign) {
	b.f(`<section id="findings"><h2>Findings (%d)</h2>`, len(c.Findings))
	if len(c.Findings) == 0 {
		b.f(`<p>No findings.</p>`)
	} else {
		b.f(`<p class="note">Grouped by probable root cause, a heuristic (forkfuzz does not bisect causes): signatures one program showed first together, and one symptom (operation and memory kind) under several oracles; the findings in no group follow. Count: failing runs that showed the signature (from %s).</p>`, campaign.StatsFile)
		b.f(`<table class="findings"><tr><th>signature</th><th>oracle</th><th class="num">count</th><th>first seen</th><th>last seen</th><th class="num">ops (min)</th><th class="num">replay rate</th><th>program</th><th>report</th></tr>`)
		for _, g := range groupByProgram(c.Findings) {
			if len(g) > 1 {
				b.f(`<tr><th colspan="9">%s</th></tr>`, esc(groupTitle(g)))
			} else if g[0].single {
				b.f(`<tr><th colspan="9">in no group</th></tr>`)
			}
			for _, r := range g {
				replay := "—"
				if r.Replays > 0 {
					replay = fmt.Sprintf("%d/%d (%.0f%%)", r.Reproduced, r.Replays, 100*float64(r.Reproduced)/float64(r.Replays))
				}
				ops := fmt.Sprint(r.Ops)
				if r.Minimized {
					ops = fmt.Sprintf("%d → %d", r.Ops, r.MinOps)
				}
				count := "—"
				if r.Count > 0 {
					count = fmt.Sprint(r.Count)
				}
				link := c.LinkPrefix + r.Dir + "/"
				b.f(`<tr><td class="mono"><a href="%s%s">%s</a></td><td><span class="badge b-%s">%s</span></td><td class="num">%s</td><td>%s</td><td>%s</td><td class="num">%s</td><td class="num">%s</td><td class="mono">%d / %d</td><td><a href="%s%s">report</a> · <a href="%sreport.txt">text</a></td></tr>`,
					esc(link), FindingHTML, esc(r.Signature), esc(r.Oracle), esc(r.Oracle), count, tfmt(r.First), tfmt(r.Last), ops, replay, r.CampaignSeed, r.Index, esc(link), FindingHTML, esc(link))
			}
		}
		b.f(`</table>`)
	}
	b.f(`</section></main>`)
}

// groupRow is a finding row in a group; single marks the first of the
// rows in no group.
type groupRow struct {
	FindingRow
	single bool
}

// symptom is a signature without its oracle ("lost-store:anon-private"):
// the same symptom under two oracles (a child's snapshot and a process's
// own memory) usually has one cause.
func symptom(sig string) string {
	_, rest, ok := strings.Cut(sig, ":")
	if !ok {
		return sig
	}
	return rest
}

// groupByProgram groups findings that probably share a root cause: those
// first shown by the same program (campaign seed and index), and those
// with the same symptom under different oracles. Groups of several come
// first, in order of first sight, then the findings in no group.
func groupByProgram(rows []FindingRow) [][]groupRow {
	parent := make([]int, len(rows))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	byKey := map[string]int{}
	for i, r := range rows {
		for _, k := range []string{fmt.Sprintf("program %d/%d", r.CampaignSeed, r.Index), "symptom " + symptom(r.Signature)} {
			if j, ok := byKey[k]; ok {
				parent[find(i)] = find(j)
			} else {
				byKey[k] = i
			}
		}
	}
	by := map[int][]groupRow{}
	var roots []int
	for i, r := range rows {
		root := find(i)
		if _, ok := by[root]; !ok {
			roots = append(roots, root)
		}
		by[root] = append(by[root], groupRow{FindingRow: r})
	}
	first := func(g []groupRow) time.Time {
		t := g[0].First
		for _, r := range g {
			if r.First.Before(t) {
				t = r.First
			}
		}
		return t
	}
	var multi, single [][]groupRow
	for _, root := range roots {
		g := by[root]
		sort.SliceStable(g, func(i, j int) bool {
			if symptom(g[i].Signature) != symptom(g[j].Signature) {
				return symptom(g[i].Signature) < symptom(g[j].Signature)
			}
			return g[i].Oracle < g[j].Oracle
		})
		if len(g) > 1 {
			multi = append(multi, g)
		} else {
			single = append(single, g)
		}
	}
	sort.SliceStable(multi, func(i, j int) bool { return first(multi[i]).Before(first(multi[j])) })
	sort.SliceStable(single, func(i, j int) bool {
		if single[i][0].Oracle != single[j][0].Oracle {
			return single[i][0].Oracle < single[j][0].Oracle
		}
		return single[i][0].First.Before(single[j][0].First)
	})
	if len(single) > 0 {
		single[0][0].single = true
	}
	return append(multi, single...)
}

// groupTitle says why a group's findings are together.
func groupTitle(g []groupRow) string {
	progs, symptoms := map[string]int{}, map[string]int{}
	var pl, sl []string
	for _, r := range g {
		p := fmt.Sprintf("%d (seed %d)", r.Index, r.CampaignSeed)
		if progs[p]++; progs[p] == 2 {
			pl = append(pl, p)
		}
		s := symptom(r.Signature)
		if symptoms[s]++; symptoms[s] == 2 {
			sl = append(sl, s)
		}
	}
	var why []string
	if len(pl) > 0 {
		why = append(why, "first seen together in program "+strings.Join(pl, ", "))
	}
	if len(sl) > 0 {
		why = append(why, "the same symptom under several oracles: "+strings.Join(sl, ", "))
	}
	return fmt.Sprintf("%d signatures, probably one cause: %s", len(g), strings.Join(why, "; "))
}

func tfmt(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("01-02 15:04:05")
}

// NotWorkdirError says that a directory is no forkfuzz workdir: it holds
// neither a stats file nor findings/ (a mistyped path, an empty
// directory).
type NotWorkdirError struct{ Dir string }

func (e *NotWorkdirError) Error() string {
	return fmt.Sprintf("%s: not a forkfuzz workdir (no %s, no findings/): give the --workdir of a run", e.Dir, campaign.StatsFile)
}

// CheckWorkdir returns an error unless dir is a directory holding a stats
// file or findings/.
func CheckWorkdir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: not a workdir (no such directory)", dir)
		}
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a workdir (%s, want a directory)", dir, fsutil.Kind(fi.Mode()))
	}
	for _, name := range []string{campaign.StatsFile, "findings"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return nil
		}
	}
	return &NotWorkdirError{Dir: dir}
}

// WriteCampaign writes the campaign page (and every finding's page) of a
// workdir and returns the page's path, and warnings about what it left
// out (also on the page). A finding directory that cannot be read is
// skipped, not fatal; a dir that is no workdir (CheckWorkdir) is an error.
func WriteCampaign(workdir string) (string, []string, error) {
	if err := CheckWorkdir(workdir); err != nil {
		return "", nil, err
	}
	_, warns, err := WriteFindingPages(workdir)
	if err != nil {
		return "", nil, err
	}
	c, err := LoadCampaign(workdir)
	if err != nil {
		return "", nil, err
	}
	// A directory whose page failed is not listed either (its report.json
	// may be an earlier version's); say so once.
	skipped := map[string]bool{}
	for _, w := range warns {
		if d, ok := warningDir(w); ok {
			skipped[d] = true
		}
	}
	c.Findings = slices.DeleteFunc(c.Findings, func(r FindingRow) bool { return skipped[filepath.Join(workdir, "findings", r.Dir)] })
	for _, w := range c.Warnings {
		if d, ok := warningDir(w); !ok || !skipped[d] {
			warns = append(warns, w)
		}
	}
	c.Warnings = warns
	path := filepath.Join(workdir, CampaignHTML)
	if err := os.WriteFile(path, CampaignPage(c), 0o644); err != nil {
		return "", nil, err
	}
	return path, warns, nil
}

// dirWarning is a warning about a finding directory; warningDir returns
// the directory a warning is about.
func dirWarning(dir, what string, err error) string {
	return fmt.Sprintf("finding directory %s %s: %v", dir, what, err)
}

func warningDir(w string) (string, bool) {
	rest, ok := strings.CutPrefix(w, "finding directory ")
	if !ok {
		return "", false
	}
	for _, what := range []string{" skipped: ", " not listed: "} {
		if i := strings.Index(rest, what); i >= 0 {
			return rest[:i], true
		}
	}
	return "", false
}

// timeBar draws where a campaign's time went: a stacked bar of the host's
// phases, and one of the guest's phases within the run.
func timeBar(t *campaign.TimeSpent) template.HTML {
	type part struct {
		name  string
		secs  float64
		color string
	}
	host := []part{{"run", t.Run, "#2e6fb7"}, {"generate", t.Generate, "#8e44ad"}, {"judge", t.Judge, "#27ae60"},
		{"record", t.Record, "#16a085"}, {"save", t.Save, "#e67e22"}, {"minimize", t.Minimize, "#c0392b"}}
	bar := func(parts []part, total float64) string {
		var b, legend strings.Builder
		b.WriteString(`<div class="tbar" style="display:flex;height:18px;border:1px solid #ccd;margin:4px 0">`)
		for _, p := range parts {
			if p.secs <= 0 || total <= 0 {
				continue
			}
			w := 100 * p.secs / total
			fmt.Fprintf(&b, `<div title="%s %.1f%%" style="width:%.2f%%;background:%s"></div>`, esc(p.name), w, w, p.color)
			fmt.Fprintf(&legend, `<span style="color:%s">&#9632;</span> %s %.1f%% (%.1f s) &nbsp; `, p.color, esc(p.name), w, p.secs)
		}
		b.WriteString(`</div><div class="sub">` + legend.String() + `</div>`)
		return b.String()
	}
	total := t.Generate + t.Run + t.Judge + t.Record + t.Save + t.Minimize
	out := fmt.Sprintf(`<section id="time"><h2>Where the time went</h2><p class="sub">summed over %d programs (several machines run at once); %.2f s per program in the target</p>`,
		t.Programs, t.Run/float64(t.Programs))
	out += bar(host, total)
	if len(t.Guest) > 0 {
		colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
		var names []string
		for k := range t.Guest {
			names = append(names, k)
		}
		sort.Strings(names)
		var guest []part
		inGuest := 0.0
		for i, k := range names {
			guest = append(guest, part{k, t.Guest[k], colors[i%len(colors)]})
			inGuest += t.Guest[k]
		}
		if t.Unanswered > 0 {
			guest = append(guest, part{fmt.Sprintf("runs without a result (%d)", t.UnansweredRuns), t.Unanswered, "#555"})
		}
		if rest := t.Run - inGuest - t.Unanswered; rest > 0 {
			guest = append(guest, part{"dispatch, transfer, other", rest, "#ccc"})
		}
		out += `<p class="sub">the target's run, by phase:</p>` + bar(guest, t.Run)
	}
	if len(t.Work) > 0 {
		colors := []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}
		var names []string
		sum := 0.0
		for k, v := range t.Work {
			names = append(names, k)
			sum += v
		}
		sort.Slice(names, func(i, j int) bool {
			return t.Work[names[i]] > t.Work[names[j]] || t.Work[names[i]] == t.Work[names[j]] && names[i] < names[j]
		})
		var work []part
		for i, k := range names {
			work = append(work, part{k, t.Work[k], colors[min(i, len(colors)-1)]})
		}
		out += `<p class="sub">inside the program, summed over its processes (a fork includes its census and evidence, a wait the child's run):</p>` + bar(work, sum)
	}
	return template.HTML(out + `</section>`)
}
