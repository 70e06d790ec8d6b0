package campaign

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// siteTarget reports, for the fork at op, the injection site its
// fail_nth (with child: its childfail) hits: sites[K], else
// "failslab: elsewhere".
type siteTarget struct {
	op    int
	child bool
	sites map[int]string
	ks    []int // the K of each run
	// points: the fork's failure points (0: any K is reached); a K past
	// them is not reached.
	points int
	// silent: K's whose fault hits an allocation that asks for no
	// warning (__GFP_NOWARN): injected, no report (obs.Rollback.Silent).
	silent map[int]bool
}

func (s *siteTarget) Run(p *prog.Program, _ agents.Options) (*obs.Observation, error) {
	k := p.Ops[s.op].FailNth
	if s.child {
		k = p.Ops[s.op].ChildFail
	}
	s.ks = append(s.ks, k)
	if s.points > 0 && k > s.points && !s.child {
		return &obs.Observation{Rollbacks: []obs.Rollback{{Op: s.op, Cause: obs.CauseFailNth, Injection: obs.InjNotReached, FailNth: k, Remaining: k - s.points}}}, nil
	}
	site, ok := s.sites[k]
	if !ok {
		site = "failslab: elsewhere"
	}
	if s.child {
		return &obs.Observation{Rollbacks: []obs.Rollback{{Op: s.op, Cause: obs.CauseChildFail,
			Child: &obs.ChildFault{FailNth: k, Injection: obs.InjInjected, Site: site}}}}, nil
	}
	if s.silent[k] {
		return &obs.Observation{Rollbacks: []obs.Rollback{{Op: s.op, Cause: obs.CauseFailNth, Injection: obs.InjInjected, FailNth: k, Silent: true}}}, nil
	}
	return &obs.Observation{Rollbacks: []obs.Rollback{{Op: s.op, Cause: obs.CauseFailNth, Injection: obs.InjInjected, FailNth: k, Site: site, Errno: 12}}}, nil
}

func (s *siteTarget) Close() error { return nil }
func (s *siteTarget) Name() string { return "sites" }

func TestAim(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0 count=1 stride=0x8\nfork f0 fail_nth=149\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	const want = "failslab: anon_vma_fork <- dup_mmap"
	recorded := &obs.Observation{Rollbacks: []obs.Rollback{{Op: 1, Cause: obs.CauseFailNth, Injection: obs.InjInjected, FailNth: 149, Site: want}}}
	sites := AimSites(recorded)
	if len(sites) != 1 || sites[Fault{Op: 1}] != want {
		t.Fatalf("AimSites = %v", sites)
	}
	tests := []struct {
		name    string
		at      int // where the site is now (0: nowhere)
		max     int
		wantK   int
		wantRun int
		note    string
	}{
		{"still there", 149, 25, 149, 1, "hit the recorded site again"},
		{"moved up", 152, 25, 152, 6, "fail_nth=152 hits the recorded one"},
		{"moved down", 147, 25, 147, 5, "fail_nth=147 hits the recorded one"},
		{"gone", 0, 25, 149, 25, "no fail_nth within 12 of 149"},
		{"budget", 152, 3, 149, 3, "in 3 runs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := &siteTarget{op: 1, sites: map[int]string{tc.at: want}}
			q, note, runs := Aim(context.Background(), tg, p, sites, agents.Options{}, tc.max)
			if q.Ops[1].FailNth != tc.wantK || runs != tc.wantRun || len(tg.ks) != runs || !strings.Contains(note, tc.note) {
				t.Errorf("fail_nth %d after %d runs %v, note %q; want %d after %d, note with %q", q.Ops[1].FailNth, runs, tg.ks, note, tc.wantK, tc.wantRun, tc.note)
			}
			if p.Ops[1].FailNth != 149 {
				t.Fatalf("aim changed the program it was given")
			}
		})
	}
	// A fork with fewer failure points than K: the search starts from
	// its last point (the run says how many were left), also for a
	// directive's "*" (any site, but the fork must fail).
	for _, tc := range []struct {
		name, want string
		at, wantK  int
		wantRuns   int
	}{
		{"site near the last point", want, 38, 38, 4},
		{"any site", corpus.AnySite, 0, 40, 2},
	} {
		tg := &siteTarget{op: 1, sites: map[int]string{tc.at: want}, points: 40}
		q, note, runs := Aim(context.Background(), tg, p, Sites{{Op: 1}: tc.want}, agents.Options{}, 25)
		if q.Ops[1].FailNth != tc.wantK || runs != tc.wantRuns || !strings.Contains(note, "fail_nth=149 was not reached (the fork has 40 failure points)") {
			t.Errorf("%s: fail_nth %d after %d runs %v, note %q; want %d after %d", tc.name, q.Ops[1].FailNth, runs, tg.ks, note, tc.wantK, tc.wantRuns)
		}
	}
	// A K that hits an allocation the kernel fails silently
	// (__GFP_NOWARN: injected, no report) is off the site, and aiming
	// steps on at once (it used to wait 5 s and run the same K again,
	// taking the silence for a rate limit Linux does not apply).
	tg := &siteTarget{op: 1, sites: map[int]string{150: want}, silent: map[int]bool{149: true}}
	q, note, runs := Aim(context.Background(), tg, p, sites, agents.Options{}, 25)
	if q.Ops[1].FailNth != 150 || runs != 2 || !strings.Contains(note, "fail_nth=149 hit an allocation that asks for no warning") || !strings.Contains(note, "fail_nth=150 hits the recorded one") {
		t.Errorf("silent point: fail_nth %d after %d runs %v, note %q; want 150 after 2", q.Ops[1].FailNth, runs, tg.ks, note)
	}
	// A child's fault (childfail) is aimed the same way.
	cp, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4\nstore r0 off=0x0 count=1 stride=0x8\nfork f0 childfail=30\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	const copySite = "fail_page_alloc: pte_alloc_one <- async_fork_cpr_rest"
	crec := &obs.Observation{Rollbacks: []obs.Rollback{{Op: 1, Cause: obs.CauseChildFail, Child: &obs.ChildFault{FailNth: 30, Injection: obs.InjInjected, Site: copySite}}}}
	csites := AimSites(crec)
	if len(csites) != 1 || csites[Fault{Op: 1, Child: true}] != copySite {
		t.Fatalf("AimSites of a child fault = %v", csites)
	}
	ct := &siteTarget{op: 1, child: true, sites: map[int]string{33: copySite}}
	q, note, runs = Aim(context.Background(), ct, cp, csites, agents.Options{}, AimRuns)
	if q.Ops[1].ChildFail != 33 || q.Ops[1].FailNth != 0 || runs != 6 || !strings.Contains(note, "fork f0 childfail=30 hit another site; childfail=33 hits") {
		t.Errorf("child: childfail %d (fail_nth %d) after %d runs, note %q", q.Ops[1].ChildFail, q.Ops[1].FailNth, runs, note)
	}
	// Only injected faults with a reported site are aimed at.
	for _, rb := range []obs.Rollback{
		{Op: 1, Cause: obs.CauseFailNth, Injection: obs.InjNotReached, FailNth: 149, Site: want},
		{Op: 1, Cause: obs.CauseFailNth, Injection: obs.InjInjected, FailNth: 149},
		{Op: 1, Cause: obs.CauseKill, Site: want},
	} {
		if s := AimSites(&obs.Observation{Rollbacks: []obs.Rollback{rb}}); len(s) != 0 {
			t.Errorf("AimSites(%+v) = %v, want none", rb, s)
		}
	}
}

// checkShift is a kernel whose fork allocates three times for every
// `check` the main process ran before it: fail_nth K fails the simulated
// kernel's K-3c-th point (c checks), which it reports as in the
// page-table copy for points 4-6 (where async-rollback-partial breaks
// the rollback), elsewhere otherwise.
type checkShift struct{ agents.Target }

func (s checkShift) Run(p *prog.Program, opt agents.Options) (*obs.Observation, error) {
	q := p.Clone()
	checks := 0
	for i := range q.Ops {
		switch op := &q.Ops[i]; {
		case op.Kind == prog.OpCheck && op.Proc == 0:
			checks++
		case op.FailNth > 0:
			op.FailNth = max(op.FailNth-3*checks, 0)
		}
	}
	o, err := s.Target.Run(q, opt)
	if o != nil {
		for j := range o.Rollbacks {
			rb := &o.Rollbacks[j]
			rb.Site = "sim: elsewhere"
			if rb.FailNth >= 4 && rb.FailNth <= 6 {
				rb.Site = "sim: copy_page_range"
			}
			rb.FailNth = p.Ops[rb.Op].FailNth
		}
	}
	return o, err
}

// Minimization steps that remove what moves the failure point are aimed
// again: the checks, which only shift fail_nth here, leave the
// minimized program.
func TestReduceAimsSteps(t *testing.T) {
	s, err := sim.NewTarget(sim.Config{Mode: sim.Async, Mutant: "async-rollback-partial", SchedSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tg := checkShift{s}
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=1024 thp=off\nregion r1 anon-private pages=1024 thp=off\n" +
		"store r0 off=0x0 count=4 stride=0x200000\ncheck\nstore r1 off=0x0 count=4 stride=0x200000\ncheck\ncheck\nfork f0 fail_nth=13\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := tg.Run(p, agents.Options{})
	v, herr := judge.Judge(p, o, err)
	const sig = "pagetable:pmd-rw-not-restored"
	if herr != nil || !v.Has(sig) {
		t.Fatalf("the program does not show %s: %v %v", sig, v.Signatures(), herr)
	}
	f := &Finding{Issue: judge.Issue{Signature: sig}, Program: p, Observation: o}
	ReduceContext(context.Background(), tg, f, 200, 0, "")
	checks, k := 0, 0
	for _, op := range f.Minimized.Ops {
		if op.Kind == prog.OpCheck {
			checks++
		}
		k = max(k, op.FailNth)
	}
	if checks != 0 || k < 4 || k > 6 || f.Reproduced != f.Replays || f.Replays == 0 {
		t.Fatalf("minimized to %d checks, fail_nth=%d, reproduced %d/%d:\n%s", checks, k, f.Reproduced, f.Replays, f.Minimized.Format())
	}
}

func TestMissed(t *testing.T) {
	const site = "fail_page_alloc: pte_alloc_one <- __pte_alloc <- copy_page_range <- dup_mmap <- copy_process"
	sites := Sites{{Op: 2}: "fail_page_alloc: pte_alloc_one <- __pte_alloc", {Op: 2, Child: true}: "failslab: x"}
	rb := func(inj, site string, child *obs.ChildFault) obs.Observation {
		return obs.Observation{Rollbacks: []obs.Rollback{{Fork: 1, Op: 2, Cause: obs.CauseFailNth, FailNth: 90, Injection: inj, Site: site, Child: child}}}
	}
	onChild := &obs.ChildFault{FailNth: 5, Injection: obs.InjInjected, Site: "failslab: x <- y"}
	for _, tc := range []struct {
		name string
		o    obs.Observation
		want string // "" for none missed
	}{
		{"innermost frames match", rb(obs.InjInjected, site, onChild), ""},
		{"another site", rb(obs.InjInjected, "failslab: anon_vma_fork <- dup_mmap", onChild), "fork f1's fail_nth=90 hit failslab: anon_vma_fork <- dup_mmap, not fail_page_alloc"},
		{"a frame's prefix is not a frame", rb(obs.InjInjected, "fail_page_alloc: pte_alloc_one <- __pte_alloc_kernel", onChild), "hit fail_page_alloc: pte_alloc_one <- __pte_alloc_kernel"},
		{"not reached", rb(obs.InjNotReached, "", onChild), "fork f1's fail_nth=90 was not reached"},
		{"unsupported: cannot tell", rb(obs.InjUnsupported, "", nil), ""},
		{"not reported: cannot tell", rb(obs.InjInjected, "", nil), ""},
		{"silent: an allocation the kernel fails without a report", func() obs.Observation {
			o := rb(obs.InjInjected, "", onChild)
			o.Rollbacks[0].Silent = true
			return o
		}(), "fork f1's fail_nth=90 hit an allocation that asks for no warning (__GFP_NOWARN"},
		{"child elsewhere", rb(obs.InjInjected, site, &obs.ChildFault{FailNth: 5, Injection: obs.InjInjected, Site: "failslab: z"}), "fork f1's childfail=5 hit failslab: z"},
		{"child not reached", rb(obs.InjInjected, site, &obs.ChildFault{FailNth: 5, Injection: obs.InjNotReached}), "fork f1's childfail=5 was not reached"},
		{"child silent", rb(obs.InjInjected, site, &obs.ChildFault{FailNth: 5, Injection: obs.InjInjected, Silent: true}), "fork f1's childfail=5 hit an allocation that asks for no warning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(Missed(&tc.o, sites), "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("Missed = %q, want %q", got, tc.want)
			}
			if on := OnSite(&tc.o, sites); on && got != "" {
				t.Fatalf("OnSite true while %q", got)
			}
		})
	}
}

// A directive's "*" (corpus.AnySite) takes any allocation, but a fork
// that did not fail missed it.
func TestMissedAnySite(t *testing.T) {
	sites := Sites{{Op: 2}: corpus.AnySite}
	copyFail := []obs.Event{obs.ForkEvent(obs.EvInjectedCopyFail, 0, "fork f0: allocation 121 failed in the background copy: the child is killed")}
	for _, tc := range []struct {
		inj, site string
		silent    bool
		errno     int
		events    []obs.Event
		missed    bool
	}{
		{obs.InjInjected, "failslab: anon_vma_fork <- dup_mmap", false, 12, nil, false},
		{obs.InjInjected, "fail_page_alloc: pte_alloc_one <- __pte_alloc", false, 12, nil, false},
		{obs.InjInjected, "", false, 12, nil, false}, // a kernel that reports no sites
		{obs.InjNotReached, "", false, 0, nil, true},
		// An allocation the kernel fails silently has a fallback: the
		// fork went on, nothing was tested.
		{obs.InjInjected, "", true, 0, nil, true},
		// So has a reported one the fork survived.
		{obs.InjInjected, "failslab: __khugepaged_enter <- dup_mmap", false, 0, nil, true},
		// The simulated Async-fork model: the fork returned, its
		// deferred copy failed of the fault.
		{obs.InjInjected, "", false, 0, copyFail, false},
	} {
		o := obs.Observation{Events: tc.events, Rollbacks: []obs.Rollback{{Fork: 0, Op: 2, Cause: obs.CauseFailNth, FailNth: 121, Injection: tc.inj, Site: tc.site, Silent: tc.silent, Errno: tc.errno}}}
		m := Missed(&o, sites)
		if (len(m) > 0) != tc.missed || OnSite(&o, sites) == tc.missed {
			t.Errorf("%s %q (silent %v, errno %d, events %v): missed %q, on site %v; want missed %v", tc.inj, tc.site, tc.silent, tc.errno, tc.events, m, OnSite(&o, sites), tc.missed)
		}
	}
}

func TestNearby(t *testing.T) {
	p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nfork f0 fail_nth=2\nwait f0\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := Fault{Op: 0}
	var got []int
	for i := 0; i <= AimRuns; i++ {
		if q := Nearby(p, f, i); q != nil {
			got = append(got, q.Ops[0].FailNth)
		}
	}
	// 2, then 3, 1, 4, (0), 5, (-1), ... up to 2+12.
	want := []int{2, 3, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	if !slices.Equal(got, want) {
		t.Fatalf("Nearby's K: %v, want %v", got, want)
	}
	if p.Ops[0].FailNth != 2 || Nearby(p, Fault{Op: 0, Child: true}, 0) != nil || Nearby(p, Fault{Op: 1}, 0) != nil {
		t.Fatal("Nearby changed p, or aimed a fault p does not inject")
	}
}
