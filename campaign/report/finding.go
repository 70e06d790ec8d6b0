package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// File names a report adds to a finding directory.
const (
	FindingHTML = "report.html"
	FindingJSON = "report.json"
)

// Meta is report.json: what the campaign page lists about a finding.
type Meta struct {
	Signature    string `json:"signature"`
	Oracle       string `json:"oracle"`
	Target       string `json:"target"`
	Kernel       string `json:"kernel,omitempty"`
	CampaignSeed uint64 `json:"campaign_seed"`
	Index        int64  `json:"index"`
	ProgramSeed  uint64 `json:"program_seed"`
	Ops          int    `json:"ops"`
	MinOps       int    `json:"min_ops,omitempty"`
	Minimized    bool   `json:"minimized"`
	Replays      int    `json:"replays,omitempty"`
	Reproduced   int    `json:"reproduced,omitempty"`
	MinRuns      int    `json:"min_runs,omitempty"`
	Corrupt      string `json:"corrupt,omitempty"`
	// NoCover: the run that showed it collected no kernel coverage, and
	// Replay runs it the same way (campaign.Finding.NoCover).
	NoCover bool `json:"no_cover,omitempty"`
	// NoCensus: the run took no page census at forks, and Replay runs it
	// the same way (campaign.Finding.NoCensus).
	NoCensus bool      `json:"no_census,omitempty"`
	Replay   string    `json:"replay"`
	Saved    time.Time `json:"saved"`
	// TargetArgs and KernelID are the finding's target flags and kernel
	// identity as the campaign knew them: a page drawn again from the
	// directory (forkfuzz report) keeps them.
	TargetArgs []string           `json:"target_args,omitempty"`
	KernelID   *campaign.KernelID `json:"kernel_id,omitempty"`
	// ReplayRuns are the replay runs in order (campaign.Finding.ReplayRuns).
	ReplayRuns []ReplayRun `json:"replay_runs,omitempty"`
}

// ReplayRun is one replay run in report.json.
type ReplayRun struct {
	Outcome string  `json:"outcome"`
	Seconds float64 `json:"seconds"`
}

// Files returns report.html and report.json for a finding directory
// (the finding store writes them on every save: campaign.Config.FindingPages, FindingStore.Pages).
func Files(f *campaign.Finding) (files map[string][]byte) {
	m := MetaOf(f)
	mb, _ := json.MarshalIndent(m, "", " ")
	files = map[string][]byte{FindingJSON: append(mb, '\n')}
	defer func() {
		// A page must never cost a campaign its finding.
		if r := recover(); r != nil {
			files[FindingHTML] = page("forkfuzz: "+f.Issue.Signature, template.HTML(fmt.Sprintf(
				`<main><section><h2>%s</h2><p class="warn">report.html could not be drawn: %s</p><p>See report.txt.</p></section></main>`,
				esc(f.Issue.Signature), esc(fmt.Sprint(r)))))
		}
	}()
	files[FindingHTML] = FindingPage(f)
	return files
}

// MetaOf summarizes f.
func MetaOf(f *campaign.Finding) Meta {
	m := Meta{Signature: f.Issue.Signature, Oracle: string(f.Issue.Oracle), Target: f.Target, Kernel: kernelOf(f),
		CampaignSeed: f.CampaignSeed, Index: f.Index, ProgramSeed: f.ProgramSeed, Corrupt: f.Corrupt, NoCover: f.NoCover, NoCensus: f.NoCensus,
		Replay: ReplayCommand(f), Saved: time.Now().UTC(), TargetArgs: f.TargetArgs}
	if f.Kernel.String() != "unknown" {
		k := f.Kernel
		m.KernelID = &k
	}
	if f.Program != nil {
		m.Ops = len(f.Program.Ops)
	}
	if f.Minimized != nil {
		m.Minimized, m.MinOps, m.Replays, m.Reproduced, m.MinRuns = true, len(f.Minimized.Ops), f.Replays, f.Reproduced, f.MinRuns
	}
	for _, r := range f.ReplayRuns {
		m.ReplayRuns = append(m.ReplayRuns, ReplayRun{Outcome: r.Outcome, Seconds: r.Took.Seconds()})
	}
	return m
}

// kernelOf is the kernel a finding ran on, as far as it is known: the
// campaign's identity of it (as report.txt says), else what the
// observations said.
func kernelOf(f *campaign.Finding) string {
	if k := f.Kernel.String(); k != "unknown" {
		return k
	}
	for _, o := range []*obs.Observation{f.MinObs, f.Observation} {
		if o != nil && o.Kernel != "" {
			return "Linux " + o.Kernel
		}
	}
	if f.Target == "native" {
		var u unix.Utsname
		if unix.Uname(&u) == nil {
			return "Linux " + unix.ByteSliceToString(u.Release[:]) + " (host)"
		}
	}
	if strings.HasPrefix(f.Target, "sim-") {
		return "simulated kernel (" + strings.TrimPrefix(f.Target, "sim-") + ")"
	}
	return ""
}

// ReplayCommand is the command that runs the finding's reproducer again
// from its directory: the campaign's (Finding.Replay, as report.txt has
// it) when it knew the target's flags; a reconstruction from the target's
// name only for a finding that does not say them.
func ReplayCommand(f *campaign.Finding) string {
	if len(f.TargetArgs) > 0 {
		return f.Replay()
	}
	file := "program.ffz"
	if f.Minimized != nil {
		file = "minimized.ffz"
	}
	args := []string{"forkfuzz", "exec"}
	switch t := f.Target; {
	case t == "native" || t == "":
	case strings.HasPrefix(t, "sim-"):
		mode, mutant, _ := strings.Cut(strings.TrimPrefix(t, "sim-"), "+")
		args = append(args, "--target", "sim", "--fork", mode)
		if mutant != "" {
			args = append(args, "--mutant", mutant)
		}
	case t == "qemu":
		args = append(args, "--target", "qemu", "--kernel", "BZIMAGE")
	default:
		args = append(args, "--target", t)
	}
	if f.Corrupt != "" {
		args = append(args, "--corrupt", f.Corrupt)
	}
	if f.NoCover {
		args = append(args, "--no-cover")
	}
	if f.NoCensus {
		args = append(args, "--no-census")
	}
	return strings.Join(append(args, file), " ")
}

// evidence is the checker finding behind is: its own evidence, or the
// checker's finding of the same signature when the issue was stored
// without it (a distributed campaign's record).
func evidence(p *prog.Program, o *obs.Observation, is judge.Issue) *checker.Finding {
	if is.Evidence != nil || p == nil || o == nil {
		return is.Evidence
	}
	v := checker.Check(p, o)
	for i := range v.Findings {
		if v.Findings[i].Signature == is.Signature {
			return &v.Findings[i]
		}
	}
	return nil
}

// FindingPage renders report.html of a finding.
func FindingPage(f *campaign.Finding) []byte {
	var b html
	is := f.Issue
	b.f(`<header><h1>%s</h1><div class="sub"><span class="badge b-%s">%s</span>target %s · %s · campaign seed %d, program %d (seed %d)</div></header><main>`,
		esc(is.Signature), esc(string(is.Oracle)), esc(string(is.Oracle)), esc(f.Target), esc(orUnknown(kernelOf(f))), f.CampaignSeed, f.Index, f.ProgramSeed)

	// Identity, replay and files.
	b.f(`<section id="identity"><h2>Replay</h2><div class="cmd"><pre id="replay">%s</pre><button onclick="ffCopy('replay')">copy</button></div>`, esc(ReplayCommand(f)))
	b.f(`<div class="kv">`)
	kv := func(k, v string) { b.f(`<div>%s</div><div>%s</div>`, esc(k), v) }
	kv("target", esc(f.Target))
	kv("kernel", esc(orUnknown(kernelOf(f))))
	drawn := "program i uses campaign.ProgramSeed(campaign, i)"
	if f.Origin != "" {
		drawn = f.Origin
	}
	kv("seeds", esc(fmt.Sprintf("campaign %d, program %d, program seed %d (%s)", f.CampaignSeed, f.Index, f.ProgramSeed, drawn)))
	if f.Corrupt != "" {
		kv("NOTE", `<span class="warn">the executor ran with the test-only corruption `+esc(f.Corrupt)+`</span>`)
	}
	if f.Judged != "" {
		kv("judged", esc(f.Judged))
	}
	if f.Minimized != nil {
		rate := ""
		if f.Replays > 0 {
			rate = fmt.Sprintf("; reproduced %d/%d replays", f.Reproduced, f.Replays)
		}
		kv("minimized", esc(fmt.Sprintf("%d ops (from %d) in %d target runs%s", len(f.Minimized.Ops), len(f.Program.Ops), f.MinRuns, rate)))
		if n := f.ReplayRunsNote(); n != "" {
			kv("replays", esc(n))
		}
	} else {
		kv("minimized", "not yet (saved as soon as seen; minimization follows)")
	}
	var links []string
	for _, n := range fileNames(f) {
		links = append(links, fmt.Sprintf(`<a href="%s">%s</a>`, esc(n), esc(n)))
	}
	kv("files", strings.Join(links, " · "))
	b.f(`</div></section>`)

	// The primary run: the minimized program when it reproduced.
	p, o, pis := f.Program, f.Observation, is
	which := "original program"
	if f.Minimized != nil && f.MinObs != nil {
		p, o, pis, which = f.Minimized, f.MinObs, f.MinIssue, "minimized program"
		if pis.Signature == "" {
			pis = is
		}
	}
	b.f(`<section id="explanation"><h2>What went wrong (%s)</h2><pre>%s</pre></section>`, which, esc(pis.Explanation))
	b.f(`%s`, runSections(p, o, pis, which, attachments(f)))
	if p != f.Program && f.Program != nil {
		b.f(`<details><summary>The original program (%d ops) and its run</summary><section><h2>What went wrong (original program)</h2><pre>%s</pre></section>%s</details>`,
			len(f.Program.Ops), esc(is.Explanation), runSections(f.Program, f.Observation, is, "original program", attachments(f)))
	}
	b.f(`</main>`)
	return page("forkfuzz: "+is.Signature, b.HTML())
}

func orUnknown(s string) string {
	if s == "" {
		return "kernel unknown"
	}
	return s
}

// attachments are the issue's extra files that are HTML (porcupine's).
func attachments(f *campaign.Finding) []string {
	var out []string
	for n := range f.Issue.Files {
		if strings.HasSuffix(n, ".html") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// fileNames lists the files of the finding's directory, as Save writes
// them.
func fileNames(f *campaign.Finding) []string {
	names := []string{"report.txt", "program.ffz"}
	if f.Minimized != nil {
		names = append(names, "minimized.ffz")
	}
	if f.Observation != nil {
		names = append(names, "observation.json")
	}
	if f.MinObs != nil {
		names = append(names, "minimized-observation.json")
	}
	var extra []string
	for n := range f.Issue.Files {
		extra = append(extra, n)
	}
	sort.Strings(extra)
	return append(append(names, "seed", "signature"), extra...)
}

// runSections draws one run: the timeline, the program with results, the
// region map, the bad page's history, rollback measurements and the
// consistent-cut witness.
func runSections(p *prog.Program, o *obs.Observation, is judge.Issue, which string, att []string) template.HTML {
	if p == nil {
		return ""
	}
	ev := evidence(p, o, is)
	var b html
	if ev != nil {
		b.f(`<section id="where"><h2>Where</h2><div class="kv">`)
		kv := func(k, v string) { b.f(`<div>%s</div><div>%s</div>`, esc(k), v) }
		if ev.Proc >= 0 {
			kv("process", esc(procLabel(p, ev.Proc)))
		}
		if ev.View >= 0 {
			kv("view", esc(fmt.Sprintf("v%d (%s)", ev.View, atName(ev.At))))
		}
		if ev.Op >= 0 && ev.Op < len(p.Ops) {
			kv("operation", fmt.Sprintf("op %d <code>%s</code>", ev.Op, esc(p.Ops[ev.Op].String())))
		}
		if ev.Region >= 0 && ev.Region < len(p.Regions) {
			if ev.Page != 0 || ev.Off != 0 || ev.Expected != 0 || ev.Actual != 0 {
				kv("memory", esc(fmt.Sprintf("r%d (%s) page %d offset %#x", ev.Region, p.Regions[ev.Region].Kind, ev.Page, ev.Off)))
			} else {
				kv("memory", esc(fmt.Sprintf("r%d (%s)", ev.Region, p.Regions[ev.Region].Kind)))
			}
		}
		if ev.Expected != 0 || ev.Actual != 0 {
			kv("expected", `<span class="exp mono">`+esc(slotText(p, ev.Expected))+`</span>`)
			kv("actual", `<span class="act mono">`+esc(slotText(p, ev.Actual))+`</span>`)
		}
		b.f(`</div></section>`)
	}
	svg, trunc := timelineSVG(p, o, ev)
	b.f(`<section id="timeline"><h2>Timeline (%s)</h2><p class="note">One lane per process and thread; operations in the order they ran (by their start times), views where they were taken. A bar under an operation runs as long as it lasted (a wait spans its child's life). Hover for details.</p>%s<div class="scroll">%s</div>`, which, timelineLegend, svg)
	if trunc > 0 {
		b.f(`<p class="note">%d of %d events drawn, around the finding; %d not drawn (all operations are in the table below).</p>`, MaxTimelineEvents, MaxTimelineEvents+trunc, trunc)
	}
	b.f(`<details><summary>Operations and results</summary><table><tr><th class="num">op</th><th>process</th><th>operation</th><th>result</th><th class="num">start</th></tr>`)
	for i, op := range p.Ops {
		cls := ""
		if ev != nil && ev.Op == i {
			cls = ` class="hit"`
		}
		res, start := "", ""
		if o != nil && i < len(o.Ops) {
			res = resultText(op, o.Ops[i])
			if o.Ops[i].Ran {
				start = fmt.Sprint(o.Ops[i].Start)
			}
		}
		thread := ""
		if op.Thread > 0 {
			thread = fmt.Sprintf(" t%d", op.Thread)
		}
		b.f(`<tr%s><td class="num">%d</td><td>%s%s</td><td class="mono">%s</td><td>%s</td><td class="num mono">%s</td></tr>`,
			cls, i, esc(short(procLabel(p, op.Proc))), thread, esc(op.String()), esc(res), start)
	}
	b.f(`</table></details></section>`)
	b.f(`<section id="regions"><h2>Region map (%s)</h2>%s</section>`, which, regionMap(p, o, ev))
	if h := pageHistory(p, o, ev); h != "" {
		b.f(`<section id="page"><h2>The first bad page (%s)</h2>%s</section>`, which, h)
	}
	if r := rollbackSection(p, o, ev); r != "" {
		b.f(`<section id="rollback"><h2>Rollback measurements (%s)</h2>%s</section>`, which, r)
	}
	if t := threadSection(p, o, ev, att); t != "" {
		b.f(`<section id="threads"><h2>Threads: consistent-cut witness (%s)</h2>%s</section>`, which, t)
	}
	if o != nil && (o.Corruption != "" || o.Truncated || len(o.Events) > 0) {
		b.f(`<section><h2>Harness</h2>`)
		if o.Corruption != "" {
			b.f(`<p class="warn">test-only corruption applied: %s</p>`, esc(o.Corruption))
		}
		if o.Truncated {
			b.f(`<p class="warn">the report buffer overflowed; views may be incomplete</p>`)
		}
		for _, e := range o.Events {
			eb, _ := json.Marshal(e)
			b.f(`<pre>%s</pre>`, esc(string(eb)))
		}
		b.f(`</section>`)
	}
	return b.HTML()
}
