package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// TestTornSnapshotIsFlaggedAndVisualized: t1 stores slot 0 then slot 1,
// both during the fork call; the child sees slot 1 but not slot 0.
func TestTornSnapshotIsFlaggedAndVisualized(t *testing.T) {
	p, err := prog.Parse([]byte(`forkfuzz v1
region r0 anon-private pages=1
t1: storeloop r0 off=0x0 count=2 stride=0x8 until=f0
fork f0
wait f0
join t1
`))
	if err != nil {
		t.Fatal(err)
	}
	o := Expected(p)
	a, b := prog.SlotValue(0, 0), prog.SlotValue(0, 1)
	o.Threads = []obs.ThreadLog{{Thread: 1, Stores: []obs.TimedStore{
		{Op: 0, Slot: 0, Value: a, Inv: 10, Resp: 11},
		{Op: 0, Slot: 1, Value: b, Inv: 12, Resp: 13},
	}}}
	o.Ops[1].TSCStart, o.Ops[1].TSCEnd = 5, 30 // the fork call overlaps both stores
	for i := range o.Views {
		v := &o.Views[i]
		if v.Proc == 1 && v.At == obs.AtStart {
			v.Words = []obs.Word{{Region: 0, Off: 8, Value: b}}
			v.Pages = []obs.PageDigest{{Region: 0, Page: 0, Digest: obs.WordDigest(8, b), NonZero: 1}}
		}
	}
	found := false
	for _, f := range Check(p, o).Findings {
		if f.Oracle == "linearizability" {
			found = true
			if !strings.Contains(f.Signature, "torn") || !strings.Contains(f.Explanation, "later write but not the earlier one") {
				t.Errorf("finding: %s: %s", f.Signature, f.Explanation)
			}
		}
	}
	if !found {
		t.Fatalf("torn snapshot not flagged: %s", Check(p, o).Report())
	}
	html := LinearizabilityHTML(p, o, 10*time.Second)
	if len(html["linearizability-f0.html"]) == 0 || !strings.Contains(string(html["linearizability-f0.html"]), "<html") {
		t.Fatalf("no visualization: %v", len(html))
	}
}
