package reproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// TestQEMUReproAimsAtSite: a fork's K-th failure point in the small C
// reproducer is another allocation than in the executor. The reproducer
// of a program with a recorded fault site reads the kernel's report and
// runs itself again with K moved until the fault hits the site (exit 0
// on the reference kernel, saying where it aimed), and says UNDECIDED
// (exit 3), never ok, when no K nearby does. Before, it passed with the
// fault anywhere.
func TestQEMUReproAimsAtSite(t *testing.T) {
	image := needQEMU(t)
	path := filepath.Join(testutil.RepoRoot(t), "corpus/regress/dup-mmap-failure-rollback.ffz")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := corpus.ParseFile(path, text)
	if err != nil {
		t.Fatal(err)
	}
	sites, err := corpus.ParseSites(path, text, p)
	if err != nil || len(sites) != 1 || sites[0].Child {
		t.Fatalf("%s: sites %v, %v: want one fail_nth site", path, sites, err)
	}
	var srcs [][]byte
	for _, site := range []string{sites[0].Site, "failslab: no_such_allocation"} {
		src, err := Translate(p, Options{Sites: []Site{{Op: sites[0].Op, Site: site}}})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	console := runReproVM(t, image, "", "auto", srcs)
	got := reproExits(console)
	on, off := section(console, 0), section(console, 1)
	if got[0] != 0 || !strings.Contains(on, "the recorded site ("+sites[0].Site+")") {
		t.Errorf("recorded site: exit %d; want 0 with the fault on the site:\n%s", got[0], on)
	}
	if got[1] != exitUndecided || !strings.Contains(off, "result: UNDECIDED") || !strings.Contains(off, "running again with fail_nth=") {
		t.Errorf("a site no K hits: exit %d; want %d after aiming:\n%s", got[1], exitUndecided, off)
	}
	t.Logf("recorded site:\n%s", on)
}

// Sites name main-process forks with fail_nth, or childfail for a
// child's site; anything else is refused with the op it names.
func TestSitesRefused(t *testing.T) {
	p, err := corpus.ParseFile("t.ffz", []byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=off\nstore r0 off=0x0 count=1 stride=0x8\nfork f0 fail_nth=3\nfork f1\nwait f0\nwait f1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    Site
		want string
	}{
		{Site{Op: 0, Site: "*"}, "op 0: not a fork"},
		{Site{Op: 2, Site: "*"}, "op 2: the fork has no fail_nth"},
		{Site{Op: 1, Child: true, Site: "*"}, "op 1: the fork has no childfail"},
		{Site{Op: 1, Site: ""}, "op 1: empty"},
		{Site{Op: 9, Site: "*"}, "op 9: not a fork"},
	} {
		if _, err := Translate(p, Options{Sites: []Site{tc.s}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.s, err, tc.want)
		}
	}
	src, err := Translate(p, Options{Sites: []Site{{Op: 1, Site: "failslab: vm_area_dup <- dup_mmap"}}})
	if err != nil || !strings.Contains(string(src), `{1, 0, "failslab: vm_area_dup <- dup_mmap"},`) || !strings.Contains(string(src), "#define NSITES 1") {
		t.Fatalf("a valid site: %v", err)
	}
}
