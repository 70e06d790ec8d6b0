package corpus

import (
	"bytes"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func TestSeedsParse(t *testing.T) {
	seeds := Seeds()
	if len(seeds) < 10 {
		t.Fatalf("%d seeds, want at least 10", len(seeds))
	}
	for _, s := range seeds {
		text, err := SeedText(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(text, []byte("# Bug class: ")) {
			t.Errorf("%s does not start with a \"# Bug class:\" comment", s.Name)
		}
		if s.Prog.NumForks() == 0 {
			t.Errorf("%s has no fork", s.Name)
		}
		q, err := prog.Parse(s.Prog.Format())
		if err != nil || !bytes.Equal(q.Format(), s.Prog.Format()) {
			t.Errorf("%s does not round-trip: %v", s.Name, err)
		}
	}
}

// TestSeedsCover checks that the seeds together exercise what the bug
// classes need.
func TestSeedsCover(t *testing.T) {
	have := map[string]bool{}
	for _, s := range Seeds() {
		p := s.Prog
		for _, r := range p.Regions {
			have["region "+r.Kind.String()] = true
			if r.THP == prog.THPOn {
				have["thp on"] = true
			}
		}
		for i, op := range p.Ops {
			have[op.Kind.String()] = true
			switch op.Kind {
			case prog.OpMadvise:
				have["advice "+op.Advice.String()] = true
			case prog.OpMprotect:
				have["prot "+op.Prot.String()] = true
			case prog.OpMremap:
				if op.Flags&prog.MremapFixed != 0 {
					have["mremap fixed"] = true
				}
				if op.Flags&prog.MremapDontunmap != 0 {
					have["mremap dontunmap"] = true
				}
			case prog.OpFork:
				if op.Proc > 0 {
					have["nested fork"] = true
				}
			case prog.OpKill:
				if i > 0 && p.Ops[i-1].Kind == prog.OpFork && p.Ops[i-1].Fork == op.Fork {
					have["kill right after fork"] = true
				}
			case prog.OpPwrite:
				have["pwrite "+p.Regions[op.Region].Kind.String()] = true
			}
		}
	}
	for _, k := range strings.Split("region anon-private,region anon-shared,region memfd-private,region memfd-shared,"+
		"thp on,munmap,mmap,mlock,munlock,check,advice dontfork,advice wipeonfork,advice dofork,advice keeponfork,"+
		"advice dontneed,advice collapse,prot none,prot r,prot rw,mremap fixed,mremap dontunmap,nested fork,"+
		"kill right after fork,pwrite memfd-private", ",") {
		if !have[k] {
			t.Errorf("no seed has %q", k)
		}
	}
}
