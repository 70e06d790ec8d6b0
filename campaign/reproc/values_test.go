package reproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/testutil"
)

// allKinds is a program header with one region of every region kind
// (r<k> is of kind k), all with the same THP advice.
func allKinds(thp prog.THP) string {
	var b strings.Builder
	b.WriteString("forkfuzz v1\n")
	for k := prog.RegionKind(0); k < numOrdinaryKinds; k++ {
		fmt.Fprintf(&b, "region r%d %v pages=4 thp=%v\n", k, k, thp)
	}
	return b.String()
}

// eachRegion repeats line (with %d for the region) for every region of
// allKinds.
func eachRegion(line string) string {
	var b strings.Builder
	for k := 0; k < int(numOrdinaryKinds); k++ {
		fmt.Fprintf(&b, line+"\n", k)
	}
	return b.String()
}

// numOrdinaryKinds counts the region kinds the value programs use: the
// hugetlb kinds need 2 MiB-multiple regions and free huge pages, and the
// simulated kernel and the model do not follow them yet.
const numOrdinaryKinds = prog.HugetlbPrivate

// valuePrograms are the programs every interpreter's table test runs, for
// the C reproducer: every operation kind's example, and for every value
// of every enum argument (advice, protection, THP, region kind, mremap
// flags, mbind policy, anonymous VMA name, remapfile pgoff) a program that passes it to the
// kernel, on every region kind where it is a region's argument. Then the regression program of issue
// 30: the reproducer indexed its hand-written advice table past its end
// for mergeable and unmergeable.
func valuePrograms(t *testing.T) []entry {
	var out []entry
	add := func(name, text string) {
		t.Helper()
		p, err := prog.Parse([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		out = append(out, entry{name, p})
	}
	for _, k := range prog.OpKinds() {
		out = append(out, entry{"op/" + k.String(), prog.Example(k)})
	}
	// Each process writes every page of every region, so a wrong value
	// shows in an errno, a page state or a page's contents.
	stores := func(proc string, off int) string {
		return eachRegion(fmt.Sprintf("%sstore r%%d off=%#x count=4 stride=0x1000", proc, off))
	}
	forkLook := "fork f0\n" + stores("", 0x8) + stores("f0: ", 0x10) + "f0: check\nwait f0\n"
	for _, a := range prog.Advices() {
		add("advice/"+a.String(), allKinds(prog.THPDefault)+stores("", 0)+
			eachRegion("madvise r%d off=0x0 len=0x4000 advice="+a.String())+"check\n"+forkLook)
	}
	for p := prog.Prot(0); int(p) < prog.NumProts; p++ {
		add("prot/"+p.String(), allKinds(prog.THPDefault)+stores("", 0)+
			eachRegion("mprotect r%d off=0x1000 len=0x2000 prot="+p.String())+stores("", 0x18)+"check\n"+forkLook)
	}
	for h := prog.THP(0); int(h) < prog.NumTHPs; h++ {
		add("thp/"+h.String(), allKinds(h)+stores("", 0)+"check\n"+forkLook)
	}
	for k := prog.RegionKind(0); k < numOrdinaryKinds; k++ {
		add("regionkind/"+k.String(), fmt.Sprintf("forkfuzz v1\nregion r0 %v pages=8\n", k)+
			"store r0 off=0x0 count=8 stride=0x1000\nmunmap r0 off=0x1000 len=0x2000\nmmap r0 off=0x1000 len=0x1000\n"+
			"mremap r0 off=0x4000 len=0x4000 newlen=0x6000 flags=none\nfork f0\nstore r0 off=0x8 count=8 stride=0x1000\n"+
			"f0: store r0 off=0x10 count=8 stride=0x1000\nf0: check\nwait f0\n")
	}
	for f := prog.MremapFlags(0); f < 1<<prog.NumMremapFlags; f++ {
		to := ""
		if f&prog.MremapFixed != 0 {
			to = " to=r1 tooff=0x2000"
		}
		add("mremap/"+strings.ReplaceAll(f.String(), "|", "+"), "forkfuzz v1\nregion r0 anon-private pages=4\nregion r1 memfd-shared pages=4\n"+
			"store r0 off=0x0 count=4 stride=0x1000\nstore r1 off=0x8 count=4 stride=0x1000\n"+
			fmt.Sprintf("mremap r0 off=0x1000 len=0x1000 newlen=0x1000 flags=%v%s\n", f, to)+
			"check\nfork f0\nf0: store r0 off=0x10 count=4 stride=0x1000\nf0: check\nwait f0\n")
	}
	// The VMA operations of prog/vmaops.go with every value of their
	// argument, on every region kind, in the parent and in a child.
	vma := func(name, line string) {
		add("vmaop/"+name, allKinds(prog.THPDefault)+stores("", 0)+eachRegion(line)+"check\n"+
			"fork f0\n"+eachRegion("f0: "+line)+stores("f0: ", 0x10)+"f0: check\nwait f0\n"+stores("", 0x18)+"check\n")
	}
	for p := prog.Policy(0); int(p) < prog.NumPolicies; p++ {
		vma("mbind/"+p.String(), "mbind r%d off=0x1000 len=0x2000 policy="+p.String())
	}
	for n := prog.AnonName(0); int(n) < prog.NumAnonNames; n++ {
		vma("anonname/"+n.String(), "anonname r%d off=0x1000 len=0x2000 name="+n.String())
	}
	for _, a := range prog.Advices() {
		if prog.PMadviseAdvice(a) {
			vma("pmadvise/"+a.String(), "pmadvise r%d off=0x0 len=0x4000 advice="+a.String())
		}
	}
	vma("mlockonfault", "mlockonfault r%d off=0x1000 len=0x2000")
	vma("remapfile", "remapfile r%d off=0x1000 len=0x2000 pgoff=0x2")
	vma("remapfile/past-eof", "remapfile r%d off=0x0 len=0x2000 pgoff=0x3")
	const ksm = "regress/ksm-mergeable-every-page.ffz"
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "corpus", ksm))
	if err != nil {
		t.Fatal(err)
	}
	add(ksm, string(b))
	return out
}

// verdict classes a reproducer's exit status: a failure, a set-up error,
// or no failure (a pass, or undecided: the kernel took another path the
// model allows, which ends judging).
func verdict(code int) string {
	switch code {
	case 0, exitUndecided:
		return "no failure"
	case 1:
		return "FAIL"
	}
	return fmt.Sprintf("exit %d", code)
}

// TestEveryValueAtEveryOptLevel is the C reproducer's table test: every
// operation kind's example and a program for every value of every enum
// argument, translated, built at -O0 and at -O2 and run on the host
// kernel (correct, so: no failure), give the same verdict at both levels.
// A value read past a table (undefined behaviour, which -O0 and -O2 turn
// into different syscalls) or a wrong Linux value fails here. Under
// -short: the advice programs, the regression program, and every third
// of the others.
func TestEveryValueAtEveryOptLevel(t *testing.T) {
	requireGCC(t)
	progs := valuePrograms(t)
	for i, e := range progs {
		if testing.Short() && !strings.HasPrefix(e.name, "advice/") && !strings.HasPrefix(e.name, "regress/") && !strings.HasPrefix(e.name, "vmaop/") && i%3 != 0 {
			continue
		}
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			src, err := Translate(e.p, Options{})
			if err != nil {
				t.Fatalf("translation failed: %v\n%s", err, e.p.Format())
			}
			codes := map[string]int{}
			outs := map[string]string{}
			for _, level := range []string{"-O0", "-O2"} {
				codes[level], outs[level] = runC(t, buildAt(t, src, level))
			}
			if verdict(codes["-O0"]) != verdict(codes["-O2"]) {
				t.Fatalf("-O0: exit %d, -O2: exit %d: the C depends on undefined behaviour\n-O0:\n%s\n-O2:\n%s\nprogram:\n%s",
					codes["-O0"], codes["-O2"], outs["-O0"], outs["-O2"], e.p.Format())
			}
			for level, code := range codes {
				if verdict(code) != "no failure" {
					t.Fatalf("%s: exit %d on the host kernel, want 0:\n%s\nprogram:\n%s", level, code, outs[level], e.p.Format())
				}
				if code == exitUndecided {
					t.Logf("%s: undecided (the run left the model's predicted path):\n%s", level, outs[level])
				}
			}
		})
	}
}
