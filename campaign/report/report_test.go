package report

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// simCampaign runs a small campaign on the simulated Async-fork kernel
// with a mutant and returns its workdir.
func simCampaign(t *testing.T, mutant, profile string, programs int, seed uint64) string {
	t.Helper()
	tg, err := sim.NewTarget(sim.Config{Mode: sim.Async, Mutant: mutant})
	if err != nil {
		t.Fatal(err)
	}
	w, err := gen.Profile(profile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Logf("campaign: sim async+%s, profile %s, seed %d, %d programs, workdir %s", mutant, profile, seed, programs, dir)
	st, err := campaign.Run(context.Background(), campaign.Config{FindingPages: Files, Target: tg, Seed: seed, Programs: programs, Workdir: dir,
		Weights: w, MinimizeRuns: 60})
	if err != nil {
		t.Fatal(err)
	}
	if st.Findings == 0 {
		t.Fatalf("the mutant %s showed nothing in %d programs", mutant, programs)
	}
	return dir
}

func findingDir(t *testing.T, workdir, prefix string) string {
	t.Helper()
	ds, _ := filepath.Glob(filepath.Join(workdir, "findings", prefix+"*"))
	if len(ds) == 0 {
		t.Fatalf("no finding %s* in %s", prefix, workdir)
	}
	return ds[0]
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every saved finding carries report.html and report.json; a snapshot
// finding's page shows the bad page's history with expected and actual,
// a rollback finding's the PMD flags before and after.
func TestFindingPages(t *testing.T) {
	wd := simCampaign(t, "async-rollback-partial", "default", 200, 3)
	dirs, _ := filepath.Glob(filepath.Join(wd, "findings", "*"))
	for _, d := range dirs {
		for _, f := range []string{FindingHTML, FindingJSON} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				t.Errorf("%s: %v", d, err)
			}
		}
	}
	snapDir := findingDir(t, wd, "snapshot_")
	snap := read(t, filepath.Join(snapDir, FindingHTML))
	var meta Meta
	if err := json.Unmarshal([]byte(read(t, filepath.Join(snapDir, FindingJSON))), &meta); err != nil {
		t.Fatal(err)
	}
	replay := "forkfuzz exec --target sim --fork async --mutant async-rollback-partial minimized.ffz"
	if meta.NoCensus { // three programs in four take no page census
		replay = "forkfuzz exec --target sim --fork async --mutant async-rollback-partial --no-census minimized.ffz"
	}
	for _, want := range []string{`class="timeline"`, `class="regionmap"`, "The first bad page", `class="exp"`, `class="act"`,
		replay, `href="minimized.ffz"`} {
		if !strings.Contains(snap, want) {
			t.Errorf("snapshot page lacks %q", want)
		}
	}
	pt := read(t, filepath.Join(findingDir(t, wd, "pagetable_pmd-rw"), FindingHTML))
	for _, want := range []string{"Rollback measurements", "PMD (2 MiB at)", "present RW", "present read-only", "the finding's fork"} {
		if !strings.Contains(pt, want) {
			t.Errorf("pagetable page lacks %q", want)
		}
	}
	// A thread finding's page draws the consistent-cut witness and links
	// porcupine's view.
	// Which seed shows one within 80 programs moves with every change to
	// the generator: the first of a few that does.
	var th string
	for seed := uint64(1); seed <= 6 && th == ""; seed++ {
		td := simCampaign(t, "async-sync-pte-only", "threads", 80, seed)
		if ds, _ := filepath.Glob(filepath.Join(td, "findings", "linearizability_*")); len(ds) > 0 {
			th = read(t, filepath.Join(ds[0], FindingHTML))
		}
	}
	if th == "" {
		t.Fatal("no linearizability finding in 80 programs of seeds 1-6 of the threads profile on async-sync-pte-only")
	}
	for _, want := range []string{`class="witness"`, "violation", `stroke="#d0021b" stroke-width="2"`, `href="linearizability-f`} {
		if !strings.Contains(th, want) {
			t.Errorf("thread page lacks %q", want)
		}
	}
	// The page of a finding directory read back equals what Save wrote,
	// but for the evidence, recomputed from the program and observation.
	f, err := LoadFinding(findingDir(t, wd, "snapshot_"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Minimized == nil || f.MinObs == nil || f.Replays != 5 || f.Target != "sim-async+async-rollback-partial" {
		t.Fatalf("loaded finding: minimized %v, replays %d, target %q", f.Minimized != nil, f.Replays, f.Target)
	}
	again := string(FindingPage(f))
	if !strings.Contains(again, `class="exp"`) || !strings.Contains(again, "The first bad page") {
		t.Error("a page from a loaded finding directory lacks the bad page's history")
	}
}

var (
	reHref      = regexp.MustCompile(`href="([^"]+)"`)
	reFindingTR = regexp.MustCompile(`<tr><td class="mono"><a href="findings/[^"]+/report.html">`)
)

// checkLinks checks that every relative link of a dumped page names a file
// beside it.
func checkLinks(t *testing.T, dom, dir string) int {
	t.Helper()
	n := 0
	for _, m := range reHref.FindAllStringSubmatch(dom, -1) {
		href := strings.ReplaceAll(m[1], "&amp;", "&")
		if strings.Contains(href, "://") || strings.HasPrefix(href, "#") {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(href))
		if _, err := os.Stat(path); err != nil {
			t.Errorf("link %q: %v", href, err)
		}
		n++
	}
	return n
}

// The pages render in a real browser: headless Chromium loads the campaign
// page and finding pages (snapshot, rollback, thread) from files, its
// inline script counts the SVG plots that laid out with a size; the
// findings table lists every finding directory and every link resolves.
// Screenshots go to testdata/out (or $FORKFUZZ_ARTIFACTS).
func TestPagesInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser test runs campaigns and Chromium (about 30 s)")
	}
	bin := testutil.Chromium(t)
	wd := simCampaign(t, "async-rollback-partial", "default", 200, 3)
	td := simCampaign(t, "async-sync-pte-only", "threads", 80, 2)
	index, _, err := WriteCampaign(wd)
	if err != nil {
		t.Fatal(err)
	}
	out := testutil.ArtifactDir(t)
	dom := testutil.DumpDOM(t, bin, "file://"+index)
	if testutil.BodyAttr(dom, "data-rendered") != "1" {
		t.Fatal("the campaign page's load handler did not run")
	}
	if n, _ := strconv.Atoi(testutil.BodyAttr(dom, "data-svg")); n < 2 {
		t.Errorf("campaign page: %d plots rendered, want 2", n)
	}
	dirs, _ := filepath.Glob(filepath.Join(wd, "findings", "*"))
	if rows := len(reFindingTR.FindAllString(dom, -1)); rows != len(dirs) || rows == 0 {
		t.Errorf("findings table: %d rows for %d finding directories", rows, len(dirs))
	}
	if n := checkLinks(t, dom, wd); n < 2*len(dirs) {
		t.Errorf("campaign page: %d links, want at least %d", n, 2*len(dirs))
	}
	testutil.Screenshot(t, bin, "file://"+index, filepath.Join(out, "campaign.png"), 1300, 1400)

	pages := []struct {
		name, dir, want string
		svgs            int
	}{
		{"snapshot", findingDir(t, wd, "snapshot_"), `id="page"`, 3},
		{"rollback", findingDir(t, wd, "pagetable_pmd-rw"), `id="rollback"`, 3},
		{"thread", findingDir(t, td, "linearizability_"), `class="witness"`, 4},
	}
	for _, pg := range pages {
		path := filepath.Join(pg.dir, FindingHTML)
		dom := testutil.DumpDOM(t, bin, "file://"+path)
		if testutil.BodyAttr(dom, "data-rendered") != "1" {
			t.Fatalf("%s page: the load handler did not run", pg.name)
		}
		// Timeline, region maps (one per region) and, for threads, the witness.
		if n, _ := strconv.Atoi(testutil.BodyAttr(dom, "data-svg")); n < pg.svgs {
			t.Errorf("%s page: %d SVGs rendered, want at least %d", pg.name, n, pg.svgs)
		}
		if !strings.Contains(dom, pg.want) || !strings.Contains(dom, `class="timeline"`) {
			t.Errorf("%s page lacks %s or the timeline", pg.name, pg.want)
		}
		if n := checkLinks(t, dom, pg.dir); n < 5 {
			t.Errorf("%s page: %d links", pg.name, n)
		}
		testutil.Screenshot(t, bin, "file://"+path, filepath.Join(out, "finding-"+pg.name+".png"), 1300, 2400)
	}
	if !strings.Contains(read(t, filepath.Join(findingDir(t, td, "linearizability_"), FindingHTML)), `href="linearizability-f`) {
		t.Error("the thread finding's page does not link porcupine's view")
	}
	t.Logf("screenshots in %s", out)
}

// A page is drawn whatever the observation holds: truncated results,
// views of unknown processes, odd runs and evidence out of range.
func TestFindingPageOnOddInput(t *testing.T) {
	tg, err := sim.NewTarget(sim.Config{Mode: sim.Async})
	if err != nil {
		t.Fatal(err)
	}
	w := gen.DefaultWeights()
	for i := int64(0); i < 30; i++ {
		p := campaign.NewProgram(17, i, nil, w)
		o, _ := tg.Run(p, agents.Options{})
		if o == nil {
			continue
		}
		ev := &checker.Finding{Oracle: checker.OracleSnapshot, Proc: int(i % 4), View: int(i%5) - 1, Op: int(i*7) % (len(p.Ops) + 3),
			Region: int(i%3) - 1, Page: int(i), Off: uint64(i) * 8, Expected: prog.SlotValue(int(i), 0), Actual: uint64(i)}
		f := &campaign.Finding{Issue: judge.Issue{Oracle: ev.Oracle, Signature: "snapshot:test", Evidence: ev}, Program: p, Observation: o, Target: "sim-async"}
		if b := FindingPage(f); !strings.HasSuffix(string(b), "</html>\n") {
			t.Fatalf("program %d: page incomplete", i)
		}
		// Now break the observation.
		o.Ops = o.Ops[:len(o.Ops)/2]
		o.Views = append(o.Views, obs.View{Proc: 99, At: 12345, Runs: []obs.Run{{Region: 0, First: -3, N: 5, State: obs.Readable}, {Region: 40, First: 0, N: 1}}})
		ev.View = len(o.Views) - 1
		if b := FindingPage(f); !strings.HasSuffix(string(b), "</html>\n") {
			t.Fatalf("program %d, broken observation: page incomplete", i)
		}
	}
}

// Findings first shown by one program, or showing one symptom under
// several oracles, are grouped; the rest follow, one per group.
func TestGroupByProgram(t *testing.T) {
	row := func(sig string, index int64) FindingRow {
		return FindingRow{Meta: Meta{Signature: sig, Oracle: strings.SplitN(sig, ":", 2)[0], CampaignSeed: 1, Index: index}}
	}
	gs := groupByProgram([]FindingRow{
		row("snapshot:lost-store:anon-private", 1), row("memory:lost-store:anon-private", 5),
		row("pagetable:pmd-rw-not-restored", 7), row("pagetable:write-fault-hang", 7),
		row("memory:stale-store:memfd-private", 9), row("linearizability:no-cut:memory", 11),
	})
	var got []string
	for _, g := range gs {
		var sigs []string
		for _, r := range g {
			sigs = append(sigs, r.Signature)
		}
		got = append(got, strings.Join(sigs, " "))
	}
	want := []string{
		"memory:lost-store:anon-private snapshot:lost-store:anon-private",
		"pagetable:pmd-rw-not-restored pagetable:write-fault-hang",
		"linearizability:no-cut:memory",
		"memory:stale-store:memfd-private",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !gs[2][0].single || gs[3][0].single {
		t.Error("the first finding in no group is not marked")
	}
	if title := groupTitle(gs[1]); !strings.Contains(title, "first seen together in program 7") {
		t.Errorf("group title %q", title)
	}
}

// A timeline too long to draw shows the window around the finding.
func TestTimelineWindow(t *testing.T) {
	old := MaxTimelineEvents
	MaxTimelineEvents = 10
	defer func() { MaxTimelineEvents = old }()
	var p *prog.Program
	for i := int64(0); p == nil || len(p.Ops) < 40; i++ {
		p = campaign.NewProgram(5, i, nil, gen.DefaultWeights())
	}
	tg, _ := sim.NewTarget(sim.Config{Mode: sim.Async})
	o, err := tg.Run(p, agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	op := len(p.Ops) - 3
	svg, trunc := timelineSVG(p, o, &checker.Finding{Op: op, View: -1, Region: -1})
	if trunc != len(order(p, o))-10 {
		t.Errorf("%d events not drawn, want %d", trunc, len(order(p, o))-10)
	}
	if !strings.Contains(svg, "<title>op "+strconv.Itoa(op)+":") || strings.Contains(svg, "<title>op 0:") {
		t.Errorf("the window does not hold op %d alone of the far ones", op)
	}
}

// BenchmarkFindingPage draws report.html of a saved finding (the original
// program and the minimized one), as FindingStore.Save does on every save.
func BenchmarkFindingPage(b *testing.B) {
	tg, err := sim.NewTarget(sim.Config{Mode: sim.Async, Mutant: "async-rollback-partial"})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	st, err := campaign.Run(context.Background(), campaign.Config{FindingPages: Files, Target: tg, Seed: 5, Programs: 200, Workdir: dir,
		Weights: gen.DefaultWeights(), MinimizeRuns: 60})
	if err != nil || len(st.Saved) == 0 {
		b.Fatalf("no finding: %v", err)
	}
	var fs []*campaign.Finding
	for _, d := range st.Saved {
		f, err := LoadFinding(d)
		if err != nil {
			b.Fatal(err)
		}
		fs = append(fs, f)
	}
	b.ResetTimer()
	bytes := 0
	for i := 0; i < b.N; i++ {
		bytes += len(FindingPage(fs[i%len(fs)]))
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "B/page")
}
