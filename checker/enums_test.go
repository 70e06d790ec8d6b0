package checker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The model has a rule for every operation kind: each kind's example,
// predicted (Expected) and then judged against its own prediction (Check),
// leaves no "unhandled" note.
func TestEveryOpKindModelled(t *testing.T) {
	for k := prog.OpKind(0); int(k) < prog.NumOpKinds; k++ {
		p := prog.Example(k)
		o := Expected(p)
		v := Check(p, o)
		for _, n := range v.Notes {
			if strings.Contains(n, "unhandled") {
				t.Errorf("%v: %s", k, n)
			}
		}
	}
}

// The model has a rule for every advice, protection and mremap flag set:
// a madvise of each advice, an mprotect of each protection and an mremap
// of each flag combination the format allows are judged without an
// "unhandled" note.
func TestEveryArgumentModelled(t *testing.T) {
	var progs []string
	for _, a := range prog.Advices() {
		progs = append(progs, "store r0 off=0x0 count=1 stride=0x8\nmadvise r0 off=0x0 len=0x1000 advice="+a.String())
	}
	for p := prog.Prot(0); int(p) < prog.NumProts; p++ {
		progs = append(progs, "mprotect r0 off=0x0 len=0x1000 prot="+p.String())
	}
	for p := prog.Policy(0); int(p) < prog.NumPolicies; p++ {
		progs = append(progs, "mbind r0 off=0x0 len=0x1000 policy="+p.String())
	}
	for n := prog.AnonName(0); int(n) < prog.NumAnonNames; n++ {
		progs = append(progs, "anonname r0 off=0x0 len=0x1000 name="+n.String())
	}
	for _, a := range prog.Advices() {
		if prog.PMadviseAdvice(a) {
			progs = append(progs, "pmadvise r0 off=0x0 len=0x1000 advice="+a.String())
		}
	}
	for _, pgoff := range []uint64{0, 1, 4, prog.SpanPages - 1, prog.MaxPgOff} {
		progs = append(progs, fmt.Sprintf("remapfile r1 off=0x0 len=0x2000 pgoff=%#x", pgoff))
	}
	for f := prog.MremapFlags(0); int(f) < 1<<prog.NumMremapFlags; f++ {
		to := ""
		if f&prog.MremapFixed != 0 {
			to = " to=r0 tooff=0x8000"
		}
		progs = append(progs, "mremap r0 off=0x0 len=0x1000 newlen=0x1000 flags="+f.String()+to)
	}
	for _, text := range progs {
		p, err := prog.Parse([]byte("forkfuzz v1\nregion r0 anon-private pages=4 thp=default\nregion r1 memfd-shared pages=4 thp=default\n" + text + "\ncheck\n"))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		for _, n := range Check(p, Expected(p)).Notes {
			if strings.Contains(n, "unhandled") {
				t.Errorf("%s: %s", text, n)
			}
		}
	}
}
