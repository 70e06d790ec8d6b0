package prog

import (
	"errors"
	"strings"
	"testing"
)

func TestFailNthRoundTrip(t *testing.T) {
	text := "forkfuzz v1\nregion r0 anon-private pages=4 thp=on\nfork f0 fail_nth=3\nwait f0\nfork f1\nwait f1\nfork f2 fail_nth=9 oom_memcg=0x10000\nwait f2\n"
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if p.Ops[0].FailNth != 3 || p.Ops[2].FailNth != 0 {
		t.Fatalf("FailNth = %d, %d; want 3, 0", p.Ops[0].FailNth, p.Ops[2].FailNth)
	}
	if got := string(p.Format()); got != text {
		t.Fatalf("Format:\n%s\nwant:\n%s", got, text)
	}
	if got := p.Injected(); len(got) != 2 || got[0] != 0 || got[1] != 4 {
		t.Fatalf("Injected() = %v, want [0 4]", got)
	}
	if p.Ops[4].OOMMemcg != 0x10000 || p.Ops[4].FailNth != 9 {
		t.Fatalf("fork f2: %+v", p.Ops[4])
	}
}

func TestFailNthErrors(t *testing.T) {
	const head = "forkfuzz v1\nregion r0 anon-private pages=1\n"
	for _, c := range []struct{ text, want string }{
		{"fork f0 fail_nth=0\nwait f0\n", "3:18: fail_nth 0 out of range"},
		{"fork f0 fail_nth=x\nwait f0\n", "3:18: bad number"},
		{"fork f0 fail_nth=2000000\nwait f0\n", "3:18: fail_nth 2000000 out of range"},
		{"fork f0 nth=2\nwait f0\n", "3:9: unknown argument \"nth\""},
		{"fork f0 fail_nth=1 fail_nth=2\nwait f0\n", "duplicate argument"},
		{"wait f0 fail_nth=2\n", "3:1: wait takes one fork name"},
		{"kill f0 fail_nth=2\n", "kill takes one fork name"},
		{"fork f0 oom_memcg=0\nwait f0\n", "3:19: oom_memcg 0 out of range"},
		{"fork f0 oom_memcg=0x20000000000\nwait f0\n", "oom_memcg 2199023255552 out of range"},
		{"fork f0\nf0: fork f1 fail_nth=2\nf0: wait f1\nwait f0\n", "line 4: op 1: fail_nth, oom_memcg, childfail and child_oom are supported on forks of the main process only"},
	} {
		_, err := Parse([]byte(head + c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
	p := &Program{Regions: []Region{{Kind: AnonPrivate, Pages: 1}}, Ops: []Op{{Kind: OpStore, Count: 1, Stride: 8, FailNth: 2}}}
	var ve *ValidationError
	if err := p.Validate(); !errors.As(err, &ve) || ve.Op != 0 {
		t.Fatalf("fail_nth on a store: %v", err)
	}
}
