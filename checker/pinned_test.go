package checker

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestPinnedCorruptions: each way a pinned operation can break fork's
// promise is flagged by the right oracle.
func TestPinnedCorruptions(t *testing.T) {
	tests := []struct {
		name    string
		prog    string
		corrupt func(t *testing.T, p *prog.Program, o *obs.Observation)
		sig     string
		explain []string
	}{
		{
			name: "vmsplice pipe shows the child's private write",
			prog: `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x0 count=2 stride=0x8
vmsplice r0 off=0x0 len=0x1000 pipe=p0
fork f0
f0: store r0 off=0x8 count=1
f0: readpipe p0
wait f0
`,
			// The classic leak (CVE-2020-29374): the page the parent
			// spliced is written by the child, and the write shows
			// through the pipe.
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				r := &o.Ops[4]
				for k := range r.Data {
					if r.Data[k].Off == 8 {
						r.Data[k].Value = prog.SlotValue(3, 0)
					}
				}
			},
			sig:     "pipe:vmsplice-foreign-write:anon-private",
			explain: []string{"spliced from r0 page 0", "written by op 3", "child of f0"},
		},
		{
			name: "vmsplice pipe loses content",
			prog: `forkfuzz v1
region r0 memfd-private pages=1
store r0 off=0x100 count=1
vmsplice r0 off=0x0 len=0x1000 pipe=p2
madvise r0 off=0x0 len=0x1000 advice=dontneed
readpipe p2
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) { o.Ops[3].Data = nil },
			sig:     "pipe:vmsplice-lost-content:memfd-private",
			explain: []string{"held [0xa500000001000000]"},
		},
		{
			name: "procmem into a child leaks into the parent",
			prog: `forkfuzz v1
region r0 anon-private pages=1
store r0 off=0x0 count=1
fork f0
procmem r0 off=0x10 count=1 into=f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, obs.AtEnd), 0, 0x10, prog.SlotValue(2, 0))
			},
			sig:     "isolation:child-procmem-after-fork:anon-private",
			explain: []string{"main process end view", "by the child (child of f0) after fork f0"},
		},
		{
			name: "procmem into a child is lost",
			prog: `forkfuzz v1
region r0 anon-private pages=1
mprotect r0 off=0x0 len=0x1000 prot=r
fork f0
procmem r0 off=0x10 count=1 into=f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x10, 0)
			},
			sig:     "snapshot:lost-procmem:anon-private",
			explain: []string{"start view of the child of f0", "expected 0xa500000003000000 (slot 0 of op 2 `procmem"},
		},
		{
			name: "pvwrite through a read-only mapping",
			prog: `forkfuzz v1
region r0 anon-private pages=2
mprotect r0 off=0x1000 len=0x1000 prot=r
pvwrite r0 off=0x0 count=2 stride=0x1000
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) { o.Ops[1].Skipped = 0 },
			sig:     "skipped:pvwrite:anon-private",
			explain: []string{"refused 0 slots", "expects 1", "needs a writable mapping"},
		},
		{
			name: "io_uring fixed read after fork reaches the child",
			prog: `forkfuzz v1
region r0 anon-private pages=2
store r0 off=0x0 count=2 stride=0x1000
uringreg r0 off=0x0 len=0x2000
fork f0
uringread r0 off=0x1000 len=0x1000
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x1000, prog.DenseValue(3, 0))
			},
			sig:     "isolation:parent-uringread-after-fork:anon-private",
			explain: []string{"start view of the child of f0", "op 3 `uringread"},
		},
		{
			name: "io_uring fixed read missing in the parent",
			prog: `forkfuzz v1
region r0 anon-private pages=2
uringreg r0 off=0x0 len=0x2000
fork f0
uringread r0 off=0x1000 len=0x1000
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, obs.AtEnd), 0, 0x1008, 0)
			},
			sig: "memory:lost-uringread:anon-private",
		},
		{
			name: "O_DIRECT read short",
			prog: `forkfuzz v1
region r0 anon-private pages=4
odirect r0 off=0x1000 len=0x2000
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) { o.Ops[0].Ret = 0x1000 },
			sig:     "ret:odirect:anon-private",
			explain: []string{"returned 4096 bytes, expected 8192"},
		},
		{
			name: "O_DIRECT data lost before fork",
			prog: `forkfuzz v1
region r0 anon-private pages=4 thp=on
odirect r0 off=0x1000 len=0x1000
fork f0
wait f0
`,
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 1, obs.AtStart), 0, 0x1ff8, 0)
			},
			sig: "snapshot:lost-odirect:anon-private",
		},
		{
			name: "O_DIRECT on a thread racing a fork lands in the child, not the parent",
			prog: `forkfuzz v1
region r0 anon-private pages=4
store r0 off=0x1000 count=2 stride=0x1000
t1: odirect r0 off=0x1000 len=0x1000
fork f0
wait f0
join t1
`,
			// The DMA went to the page the child kept; the parent still
			// has the old content after the join.
			corrupt: func(t *testing.T, p *prog.Program, o *obs.Observation) {
				setWord(findView(t, o, 0, obs.AtEnd), 0, 0x1000, prog.SlotValue(0, 0))
			},
			sig:     "memory:stale-store:anon-private",
			explain: []string{"main process end view", "expected 0xa500000002000000 (slot 0 of op 1 `t1: odirect"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCorruption(t, tc.prog, tc.corrupt, tc.sig, tc.explain)
		})
	}
}
