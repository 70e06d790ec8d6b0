package prog

import (
	"strings"
	"testing"
)

func TestHoldRoundTrip(t *testing.T) {
	text := "forkfuzz v1\nregion r0 anon-private pages=4 thp=default\nfork f0 hold=2\nstore r0 off=0x0 count=1 stride=0x8\nwait f0\n"
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if p.Ops[0].Hold != 2 {
		t.Fatalf("hold not parsed: %+v", p.Ops[0])
	}
	if got := string(p.Format()); got != text {
		t.Fatalf("Format:\n%s\nwant\n%s", got, text)
	}
	for i, want := range []bool{true, false, true} {
		if got := HoldEnds(&p.Ops[i]); got != want {
			t.Errorf("HoldEnds(op %d %v) = %v", i, p.Ops[i].Kind, got)
		}
	}
}

func TestHoldErrors(t *testing.T) {
	const head = "forkfuzz v1\nregion r0 anon-private pages=1\n"
	for _, c := range []struct{ text, want string }{
		{"fork f0 hold=0\nwait f0\n", "3:14: hold 0 out of range 1..8"},
		{"fork f0 hold=9\nwait f0\n", "3:14: hold 9 out of range 1..8"},
		{"fork f0 hold=x\nwait f0\n", "3:14: bad number"},
		{"fork f0 hold=1 hold=2\nwait f0\n", "duplicate argument"},
		{"fork f0 hold=1 childfail=2\nwait f0\n", "line 3: op 0: hold does not combine with fault injection"},
		{"fork f0 hold=1 fail_nth=2\nwait f0\n", "line 3: op 0: hold does not combine with fault injection"},
		{"fork f0\nf0: fork f1 hold=1\nf0: wait f1\nwait f0\n", "line 4: op 1: hold is supported on forks of the main process's main thread only"},
	} {
		_, err := Parse([]byte(head + c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
	p, _ := Parse([]byte(head + "store r0 off=0x0\n"))
	p.Ops[0].Hold = 1
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "hold is an attribute of fork only") {
		t.Errorf("hold on a store: %v", err)
	}
}
