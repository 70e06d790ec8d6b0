package corpus

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const sitesProg = `forkfuzz v1
region r0 anon-private pages=16 thp=off
store r0 off=0x0 count=16 stride=0x1000
fork f0 fail_nth=90
wait f0
fork f1 childfail=7
wait f1
fork f2
wait f2
`

func TestParseSites(t *testing.T) {
	for _, tc := range []struct {
		name, directives string
		want             []FaultSite
		err              string
	}{
		{name: "none", directives: "# a comment about site selection\n"},
		{name: "fail_nth", directives: "# site f0 fail_nth: fail_page_alloc: pte_alloc_one <- __pte_alloc\n",
			want: []FaultSite{{Op: 1, Site: "fail_page_alloc: pte_alloc_one <- __pte_alloc", Line: 1}}},
		{name: "both", directives: "#site f1 childfail:  failslab: anon_vma_fork\n# site f0 fail_nth: x\n",
			want: []FaultSite{{Op: 3, Child: true, Site: "failslab: anon_vma_fork", Line: 1}, {Op: 1, Site: "x", Line: 2}}},
		{name: "no fork", directives: "# site f9 fail_nth: x\n", err: "t.ffz:1: site directive: the program has no fork f9"},
		{name: "no fail_nth", directives: "\n# site f2 fail_nth: x\n", err: "t.ffz:2: site directive: fork f2 has no fail_nth"},
		{name: "no childfail", directives: "# site f0 childfail: x\n", err: "t.ffz:1: site directive: fork f0 has no childfail"},
		{name: "twice", directives: "# site f0 fail_nth: x\n# site f0 fail_nth: y\n", err: "t.ffz:2: site directive: a second site for fork f0's fail_nth"},
		{name: "no site", directives: "# site f0 fail_nth:\n", err: "t.ffz:1: site directive: want"},
		{name: "bad attr", directives: "# site f0 fail: x\n", err: "t.ffz:1: site directive: want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.directives + sitesProg
			p, err := ParseFile("t.ffz", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSites("t.ffz", []byte(text), p)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("site %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestRegressSites checks that the embedded regression files' site
// directives name faults their programs have.
func TestRegressSites(t *testing.T) {
	n := 0
	for _, dir := range RegressionDirs {
		for _, f := range RegressionFiles(dir) {
			for i, part := range strings.Split(string(f.Text), "\n====\n") {
				p, err := prog.Parse([]byte(part))
				if err != nil {
					t.Fatalf("%s/%s part %d: %v", dir, f.Name, i+1, err)
				}
				s, err := ParseSites(f.Name, []byte(part), p)
				if err != nil {
					t.Error(err)
				}
				n += len(s)
			}
		}
	}
	if n == 0 {
		t.Error("no regression program carries a site directive (corpus/regress/dup-mmap-failure-rollback.ffz should)")
	}
}

func FuzzParseSites(f *testing.F) {
	f.Add("# site f0 fail_nth: fail_page_alloc: pte_alloc_one\n")
	f.Add("# site f1 childfail: x <- y\n# site f0 fail_nth: z\n")
	f.Add("# site f0 :\n#site\n")
	p, err := prog.Parse([]byte(sitesProg))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, directives string) {
		got, err := ParseSites("t.ffz", []byte(directives), p)
		for _, s := range got {
			if s.Op < 0 || s.Op >= len(p.Ops) || p.Ops[s.Op].Kind != prog.OpFork || s.Site == "" || s.Line < 1 {
				t.Fatalf("bad site %+v (err %v)", s, err)
			}
		}
	})
}
