package prog

import (
	"strings"
	"testing"
)

func TestChildFailRoundTrip(t *testing.T) {
	text := "forkfuzz v1\nregion r0 anon-private pages=4 thp=default\nstore r0 off=0x0 count=1 stride=0x8\nfork f0 childfail=7\nwait f0\nfork f1 child_oom=0x2000\nwait f1\n"
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if p.Ops[1].ChildFail != 7 || p.Ops[3].ChildFail != 0 || p.Ops[3].ChildOOM != 0x2000 {
		t.Fatalf("childfail not parsed: %+v", p.Ops)
	}
	if got := string(p.Format()); got != text {
		t.Fatalf("Format:\n%s\nwant\n%s", got, text)
	}
	if in := p.Injected(); len(in) != 2 || in[0] != 1 || in[1] != 3 {
		t.Fatalf("Injected() = %v, want [1 3]", in)
	}
	if in := p.ChildInjected(); len(in) != 2 || in[0] != 1 || in[1] != 3 {
		t.Fatalf("ChildInjected() = %v, want [1 3]", in)
	}
}

func TestChildFailErrors(t *testing.T) {
	const head = "forkfuzz v1\nregion r0 anon-private pages=1\n"
	for _, c := range []struct{ text, want string }{
		{"fork f0 childfail=0\nwait f0\n", "3:19: childfail 0 out of range"},
		{"fork f0 childfail=abc\nwait f0\n", "3:19: bad number"},
		{"fork f0 childfail=2000000\nwait f0\n", "childfail 2000000 out of range"},
		{"fork f0 childfail=1 childfail=2\nwait f0\n", "duplicate argument"},
		{"fork f0 childfail=1 fail_nth=2\nwait f0\n", "line 3: op 0: childfail and child_oom cannot be combined"},
		{"fork f0 childfail=1 child_oom=0x1000\nwait f0\n", "line 3: op 0: childfail and child_oom cannot be combined"},
		{"fork f0 child_oom=0\nwait f0\n", "3:19: child_oom 0 out of range"},
		{"fork f0\nf0: fork f1 childfail=2\nf0: wait f1\nwait f0\n", "line 4: op 1: fail_nth, oom_memcg, childfail and child_oom are supported on forks of the main process only"},
		{"fork f0\nf0: fork f1 child_oom=2\nf0: wait f1\nwait f0\n", "line 4: op 1: fail_nth, oom_memcg, childfail and child_oom are supported on forks of the main process only"},
	} {
		_, err := Parse([]byte(head + c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}
