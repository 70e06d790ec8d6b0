package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFaultsOf(t *testing.T) {
	cases := []struct {
		name, prog string
		want       []string
	}{
		{"none", "forkfuzz v1\nregion r0 anon-private pages=2 thp=off\nfork f0\nwait f0\n", nil},
		{"fail_nth", "forkfuzz v1\nregion r0 anon-private pages=2 thp=off\nfork f0 fail_nth=90\nwait f0\n",
			[]string{"op 0 `fork f0 fail_nth=90`: fail_nth=90 (the fork's 90. fault-injection point fails)"}},
		{"kill", "forkfuzz v1\nregion r0 anon-private pages=2 thp=off\nfork f0\nkill f0\nwait f0\n",
			[]string{"op 1 `kill f0`: SIGKILL of the child"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := faultsOf(mustProg(t, c.prog))
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("faultsOf = %q, want %q", got, c.want)
			}
		})
	}
}

// A finding that counts against the kernel gets a report a maintainer
// can paste: kernel identity, reproducibility, faults, the program, the
// C reproducer, the one-line retest, Reported-by/Closes placeholders.
func TestMailReport(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "repro.c"), []byte("int main(){}\n"), 0o644)
	p := mustProg(t, "forkfuzz v1\nregion r0 anon-private pages=2 thp=off\nfork f0 fail_nth=90\nwait f0\n")
	f := FindingRecord{Signature: "rollback:parent-changed", Oracle: "rollback", Status: StatusNew, StatusReason: "passes on the baseline (0/3 replays)",
		Dir: dir, Minimized: filepath.Join(dir, "minimized.ffz"), Replays: 5, Reproduced: 4, reproProg: p, Faults: faultsOf(p),
		Replay: "forkfuzz exec --target qemu --kernel /k/bz " + filepath.Join(dir, "minimized.ffz"), Explanation: "the parent's page 2 changed across a failed fork",
		Baseline: &BaselineReplay{Runs: 3}}
	known := FindingRecord{Signature: "errno:x", Status: StatusKnown, Dir: dir}
	g := &gate{res: &Result{Version: "forkfuzz test", Findings: []FindingRecord{f, known},
		Kernel:   KernelIdentity{Target: "qemu", Image: "/k/bz", SHA256: "ab12", Release: "6.1.192", ConfigSHA256: "cd34", Config: "embedded"},
		Baseline: &KernelIdentity{Target: "qemu", Release: "6.1.191"}}}
	g.writeMails()
	if g.res.Findings[0].Mail == "" || g.res.Findings[1].Mail != "" {
		t.Fatalf("mail paths %q %q: want one for the new finding only", g.res.Findings[0].Mail, g.res.Findings[1].Mail)
	}
	b, err := os.ReadFile(g.res.Findings[0].Mail)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Subject: [forkfuzz] rollback:parent-changed on 6.1.192", "image sha256:   ab12", "config sha256:  cd34",
		"reproducible:   reproducible: 4/5 replays", "6.1.191: 0/3 replays", "faults injected: op 0 `fork f0 fail_nth=90`", "fork f0 fail_nth=90\n",
		"gcc -O2 -static -pthread repro.c", "  forkfuzz exec --target qemu --kernel /k/bz", "Reported-by: <", "Closes: <"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("mail lacks %q:\n%s", want, b)
		}
	}
}
