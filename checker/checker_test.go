package checker

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestCorruptions corrupts the model's own clean observation in the ways
// broken fork implementations do and checks that the right oracle fires
// with an explanation that names the place and the writer.
func TestCorruptions(t *testing.T) {
	tests := []struct {
		name    string
		prog    string
		corrupt func(t *testing.T, p *prog.Program, o *obs.Observation)
		sig     string   // expected signature of the first finding
		explain []string // substrings of its explanation
	}{
		{
			name: "parent write after fork visible in child",
			prog: `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x0 count=2 stride=0x1000
fork f0
store r0 off=0x1008 count=1
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x1008, prog.SlotValue(2, 0))
			},
			sig:     "isolation:parent-store-after-fork:anon-private",
			explain: []string{"start view of the child of f0", "r0 (anon-private) page 1 offset 0x1008", "expected 0", "op 2 `store r0 off=0x1008", "after fork f0"},
		},
		{
			name: "child write visible in parent",
			prog: `forkfuzz v1
region r0 anon-private pages=1
store r0 off=0x0 count=1
fork f0
f0: store r0 off=0x10 count=1
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, obs.AtEnd), 0, 0x10, prog.SlotValue(2, 0))
			},
			sig:     "isolation:child-store-after-fork:anon-private",
			explain: []string{"main process end view", "offset 0x10", "op 2 `f0: store r0 off=0x10", "by the child (child of f0) after fork f0"},
		},
		{
			name: "grandchild write visible in main process",
			prog: `forkfuzz v1
region r0 anon-private pages=1
fork f0
f0: fork f1
f1: store r0 off=0x20 count=1
f0: wait f1
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, obs.AtEnd), 0, 0x20, prog.SlotValue(2, 0))
			},
			sig:     "isolation:descendant-store-after-fork:anon-private",
			explain: []string{"main process end view", "offset 0x20", "after fork f0"},
		},
		{
			name: "pre-fork write missing in child",
			prog: `forkfuzz v1
region r0 anon-private pages=4 thp=on
store r0 off=0x2000 count=3 stride=0x8
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x2008, 0)
			},
			sig:     "snapshot:lost-store:anon-private",
			explain: []string{"start view of the child of f0", "page 2 offset 0x2008", "expected 0xa500000001000001 (slot 1 of op 0", "actual 0"},
		},
		{
			name: "stale pre-fork value in child",
			prog: `forkfuzz v1
region r0 anon-private pages=1
store r0 off=0x0 count=1
store r0 off=0x0 count=1
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0, prog.SlotValue(0, 0))
			},
			sig:     "snapshot:stale-store:anon-private",
			explain: []string{"expected 0xa500000002000000 (slot 0 of op 1", "actual 0xa500000001000000 (slot 0 of op 0"},
		},
		{
			name: "dontfork mapping present in child",
			prog: `forkfuzz v1
region r0 anon-private pages=1
region r1 memfd-shared pages=2
madvise r1 off=0x0 len=0x2000 advice=dontfork
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setState(findView(t, o, 1, obs.AtStart), 1, 1, obs.Readable)
			},
			sig:     "mapping:dontfork-readable:memfd-shared",
			explain: []string{"start view of the child of f0", "r1 pages 1..1", "expected unmapped, actual readable", "MADV_DONTFORK"},
		},
		{
			name: "wipeonfork not zeroed",
			prog: `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x1000 count=1
madvise r0 off=0x0 len=0x2000 advice=wipeonfork
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x1000, prog.SlotValue(0, 0))
			},
			sig:     "snapshot:wipeonfork-not-zeroed:anon-private",
			explain: []string{"page 1 offset 0x1000", "MADV_WIPEONFORK"},
		},
		{
			name: "memfd-private page does not follow pwrite",
			prog: `forkfuzz v1
region r0 memfd-private pages=2
store r0 off=0x0 count=1
fork f0
pwrite r0 off=0x1000 count=1
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x1000, 0)
			},
			sig:     "shared:lost-pwrite:memfd-private",
			explain: []string{"page 1 offset 0x1000", "op 2 `pwrite r0 off=0x1000", "after fork f0", "actual 0"},
		},
		{
			name: "memfd-private COW page follows pwrite",
			prog: `forkfuzz v1
region r0 memfd-private pages=1
store r0 off=0x0 count=1
pwrite r0 off=0x8 count=1
check
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, 2), 0, 0x8, prog.SlotValue(1, 0))
			},
			sig:     "memory:unexpected-pwrite:memfd-private",
			explain: []string{"offset 0x8", "expected 0", "op 1 `pwrite"},
		},
		{
			name: "child shared write not visible in parent",
			prog: `forkfuzz v1
region r0 anon-shared pages=1
fork f0
f0: store r0 off=0x40 count=1
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, obs.AtEnd), 0, 0x40, 0)
			},
			sig:     "shared:lost-store:anon-shared",
			explain: []string{"main process end view", "offset 0x40", "op 1 `f0: store r0 off=0x40"},
		},
		{
			name: "parent shared write not visible in child",
			prog: `forkfuzz v1
region r0 memfd-shared pages=1
fork f0
store r0 off=0x40 count=1
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x40, 0)
			},
			sig:     "shared:lost-store:memfd-shared",
			explain: []string{"start view of the child of f0", "offset 0x40"},
		},
		{
			name: "wrong errno",
			prog: `forkfuzz v1
region r0 anon-shared pages=1
madvise r0 off=0x0 len=0x1000 advice=free
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[0].Errno = 0
			},
			sig:     "errno:madvise-free:anon-shared",
			explain: []string{"op 0 `madvise r0", "returned 0 (success), expected 22 (EINVAL)", "MADV_FREE"},
		},
		{
			name: "dontneed on locked memory succeeds",
			prog: `forkfuzz v1
region r0 anon-private pages=2
mlock r0 off=0x0 len=0x2000
madvise r0 off=0x1000 len=0x1000 advice=dontneed
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[1].Errno = 0
			},
			sig:     "errno:madvise-dontneed:anon-private",
			explain: []string{"VM_LOCKED"},
		},
		{
			name: "crashed child",
			prog: `forkfuzz v1
region r0 anon-private pages=1
fork f0
f0: store r0 off=0x0 count=1
f0: check
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[2] = obs.OpResult{}
				o.Ops[3].Ret = 11
				var vs []obs.View
				for _, v := range o.Views {
					if v.At != 2 {
						vs = append(vs, v)
					}
				}
				o.Views = vs
			},
			sig:     "errno:not-run:check",
			explain: []string{"child of f0", "op 2 `f0: check`", "did not run"},
		},
		{
			name: "child killed by signal",
			prog: `forkfuzz v1
region r0 anon-private pages=1
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[1].Ret = 0x8b // SIGSEGV, core dumped
			},
			sig:     "child-exit:signal-11",
			explain: []string{"child of f0", "wait status 0x8b", "killed by signal 11, core dumped"},
		},
		{
			name: "killed child exits normally",
			prog: `forkfuzz v1
region r0 anon-private pages=1
fork f0
kill f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[2].Ret = 0
			},
			sig:     "child-exit:killed-exit-code",
			explain: []string{"SIGKILL", "wait status 0x0"},
		},
		{
			name: "killed child ran",
			prog: `forkfuzz v1
region r0 anon-private pages=1
fork f0
f0: check
kill f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[1] = obs.OpResult{Ran: true}
				o.Views = append(o.Views, obs.View{Proc: 1, At: 1, Runs: []obs.Run{{Region: 0, N: 1, State: obs.Readable}}})
			},
			sig:     "child-exit:killed-child-ran",
			explain: []string{"killed by op 2 `kill f0`"},
		},
		{
			name: "missing start view",
			prog: `forkfuzz v1
region r0 anon-private pages=1
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Views = o.Views[1:]
			},
			sig:     "missing-view:start",
			explain: []string{"start view of the child of f0"},
		},
		{
			name: "skipped slots",
			prog: `forkfuzz v1
region r0 anon-private pages=2
mprotect r0 off=0x1000 len=0x1000 prot=r
store r0 off=0x0 count=2 stride=0x1000
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				o.Ops[1].Skipped = 0
			},
			sig:     "skipped:store:anon-private",
			explain: []string{"skipped 0 slots, expected 1"},
		},
		{
			name: "dontneed does not zero",
			prog: `forkfuzz v1
region r0 anon-private pages=1
store r0 off=0x0 count=1
madvise r0 off=0x0 len=0x1000 advice=dontneed
check
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, 2), 0, 0, prog.SlotValue(0, 0))
			},
			sig:     "memory:not-zeroed-after-dontneed:anon-private",
			explain: []string{"op 1 `madvise r0 off=0x0 len=0x1000 advice=dontneed` discarded"},
		},
		{
			name: "mremap loses content",
			prog: `forkfuzz v1
region r0 anon-private pages=2
region r1 anon-private pages=2
store r0 off=0x1000 count=1
mremap r0 off=0x0 len=0x2000 newlen=0x2000 flags=maymove|fixed to=r1 tooff=0x0
check
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, 2), 1, 0x1000, 0)
			},
			sig:     "memory:lost-store:anon-private",
			explain: []string{"r1 (anon-private) page 1 offset 0x1000"},
		},
		{
			name: "mremap source still mapped",
			prog: `forkfuzz v1
region r0 anon-private pages=2
region r1 anon-private pages=2
mremap r0 off=0x0 len=0x2000 newlen=0x2000 flags=maymove|fixed to=r1 tooff=0x0
check
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setState(findView(t, o, 0, 1), 0, 0, obs.Readable)
			},
			sig:     "mapping:unmapped-is-readable:anon-private",
			explain: []string{"r0 pages 0..0", "op 0 `mremap"},
		},
		{
			name: "free page shows a third value",
			prog: `forkfuzz v1
region r0 anon-private pages=1
store r0 off=0x0 count=1
madvise r0 off=0x0 len=0x1000 advice=free
store r0 off=0x8 count=1
check
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, 3), 0, 0, prog.SlotValue(2, 0))
			},
			sig:     "memory:wrong-store:anon-private",
			explain: []string{"MADV_FREE left 2 acceptable contents"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkCorruption(t, tc.prog, tc.corrupt, tc.sig, tc.explain) })
	}
}

// checkCorruption runs the model's expected observation of text through
// Check (it must pass), corrupts it, and checks that the first finding
// has signature sig and an explanation containing every explain string.
func checkCorruption(t *testing.T, text string, corrupt func(t *testing.T, p *prog.Program, o *obs.Observation), sig string, explain []string) {
	t.Helper()
	p := mustParse(t, text)
	o := Expected(p)
	if v := Check(p, o); !v.OK() {
		t.Fatalf("clean observation fails:\n%s", v.Report())
	}
	corrupt(t, p, o)
	v := Check(p, o)
	if v.OK() {
		t.Fatalf("corruption not detected")
	}
	f := v.Findings[0]
	if f.Signature != sig {
		t.Errorf("signature %q, want %q\n%s", f.Signature, sig, v.Report())
	}
	for _, s := range explain {
		if !strings.Contains(f.Explanation, s) {
			t.Errorf("explanation lacks %q:\n%s", s, f.Explanation)
		}
	}
	if testing.Verbose() {
		t.Logf("\n%s", v.Report())
	}
}

// TestFreeAlternatives: after MADV_FREE a page may keep its content or
// read as zero until written again.
func TestFreeAlternatives(t *testing.T) {
	p := mustParse(t, `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x0 count=2 stride=0x1000
madvise r0 off=0x0 len=0x2000 advice=free
check
store r0 off=0x8 count=1
check
`)
	o := Expected(p)
	v1 := findView(t, o, 0, 2)
	setWord(v1, 0, 0, 0) // page 0 reclaimed
	v2 := findView(t, o, 0, 4)
	setWord(v2, 0, 0x1000, 0) // page 1 reclaimed later
	setWord(v2, 0, 0, 0)      // page 0 stays reclaimed, then written
	if v := Check(p, o); !v.OK() {
		t.Fatalf("MADV_FREE alternatives rejected:\n%s", v.Report())
	}
}

func TestReport(t *testing.T) {
	p := mustParse(t, `forkfuzz v1
region r0 anon-private pages=4
store r0 off=0x0 count=2048 stride=0x8
fork f0
wait f0
`)
	o := Expected(p)
	v := findView(t, o, 1, obs.AtStart)
	for i := range v.Words {
		v.Words[i].Value ^= 1
	}
	for i := range v.Pages {
		v.Pages[i].Digest ^= 1
	}
	vd := Check(p, o)
	if len(vd.Findings) != MaxPerGroup {
		t.Errorf("%d detailed findings, want %d", len(vd.Findings), MaxPerGroup)
	}
	if len(vd.Omitted) != 1 || vd.Omitted[0].Count != 2048-MaxPerGroup {
		t.Errorf("omitted: %+v", vd.Omitted)
	}
	rep := vd.Report()
	if !strings.Contains(rep, "and 2043 more snapshot findings") || strings.Count(rep, "\n") > 30 {
		t.Errorf("report:\n%s", rep)
	}
	if s := vd.String(); !strings.HasPrefix(s, "FAIL: 2048 findings") {
		t.Errorf("String() = %q", s)
	}
}
