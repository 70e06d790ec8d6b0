package prog

import "testing"

func TestRacedRegions(t *testing.T) {
	head := "forkfuzz v1\nregion r0 anon-private pages=4\nregion r1 anon-private pages=4\nregion r2 memfd-shared pages=4\nregion r3 anon-private pages=4\n"
	tests := []struct {
		name string
		body string
		want uint64
	}{
		{"no threads", "store r0 off=0x0 count=1 stride=0x8\nfork f0\nwait f0\n", 0},
		{"thread store", "t1: store r1 off=0x0 count=1 stride=0x8\nfork f0\njoin t1\nwait f0\n", 1 << 1},
		{"into a child", "fork f0\npvwrite r2 off=0x0 count=1 stride=0x8 into=f0\nwait f0\n", 1 << 2},
		{"into itself", "pvwrite r2 off=0x0 count=1 stride=0x8\nfork f0\nwait f0\n", 0},
		{"moved away", "t1: store r1 off=0x0 count=1 stride=0x8\njoin t1\nmremap r1 off=0x0 len=0x1000 newlen=0x1000 flags=maymove|fixed to=r3 tooff=0x0\nfork f0\nwait f0\n", 1<<1 | 1<<3},
		{"moved in", "mremap r0 off=0x0 len=0x1000 newlen=0x1000 flags=maymove|fixed to=r1 tooff=0x0\nt1: store r1 off=0x0 count=1 stride=0x8\njoin t1\nfork f0\nwait f0\n", 1<<0 | 1<<1},
		{"chain", "mremap r0 off=0x0 len=0x1000 newlen=0x1000 flags=maymove|fixed to=r3 tooff=0x0\nmremap r3 off=0x0 len=0x1000 newlen=0x1000 flags=maymove|fixed to=r1 tooff=0x0\nt1: store r1 off=0x0 count=1 stride=0x8\njoin t1\nfork f0\nwait f0\n", 1<<0 | 1<<1 | 1<<3},
		{"not fixed", "mremap r0 off=0x0 len=0x1000 newlen=0x2000 flags=maymove\nt1: store r1 off=0x0 count=1 stride=0x8\njoin t1\nfork f0\nwait f0\n", 1 << 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(head + tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.RacedRegions(); got != tc.want {
				t.Errorf("RacedRegions = %#b, want %#b", got, tc.want)
			}
		})
	}
}
