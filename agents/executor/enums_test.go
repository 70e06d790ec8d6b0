package executor

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// The executor passes the descriptor tables' Linux values to the kernel:
// they must be the kernel's.
func TestLinuxConstants(t *testing.T) {
	madv := map[string]int{
		"MADV_DONTNEED": unix.MADV_DONTNEED, "MADV_FREE": unix.MADV_FREE, "MADV_DONTFORK": unix.MADV_DONTFORK,
		"MADV_DOFORK": unix.MADV_DOFORK, "MADV_WIPEONFORK": unix.MADV_WIPEONFORK, "MADV_KEEPONFORK": unix.MADV_KEEPONFORK,
		"MADV_HUGEPAGE": unix.MADV_HUGEPAGE, "MADV_NOHUGEPAGE": unix.MADV_NOHUGEPAGE, "MADV_COLLAPSE": unix.MADV_COLLAPSE,
		"MADV_PAGEOUT": unix.MADV_PAGEOUT, "MADV_COLD": unix.MADV_COLD,
		"MADV_MERGEABLE": unix.MADV_MERGEABLE, "MADV_UNMERGEABLE": unix.MADV_UNMERGEABLE,
		"MADV_POPULATE_READ": unix.MADV_POPULATE_READ, "MADV_POPULATE_WRITE": unix.MADV_POPULATE_WRITE,
		"MADV_DONTNEED_LOCKED": unix.MADV_DONTNEED_LOCKED,
	}
	for _, a := range prog.Advices() {
		d := a.Info()
		v, ok := madv[d.Linux]
		if !ok {
			t.Errorf("advice %v: %q is not a constant this test knows; add it", a, d.Linux)
		} else if v != d.Value {
			t.Errorf("advice %v: %s is %d on Linux, the table says %d", a, d.Linux, v, d.Value)
		}
	}
	prot := map[string]int{"PROT_NONE": unix.PROT_NONE, "PROT_READ": unix.PROT_READ, "PROT_READ|PROT_WRITE": unix.PROT_READ | unix.PROT_WRITE}
	for p := prog.Prot(0); int(p) < prog.NumProts; p++ {
		d := p.Info()
		if v, ok := prot[d.Linux]; !ok || v != d.Value {
			t.Errorf("prot %v: %s is %d (known %v), the table says %d", p, d.Linux, v, ok, d.Value)
		}
	}
	mpol := map[string]int{"MPOL_DEFAULT": unix.MPOL_DEFAULT, "MPOL_PREFERRED": unix.MPOL_PREFERRED, "MPOL_BIND": unix.MPOL_BIND,
		"MPOL_INTERLEAVE": unix.MPOL_INTERLEAVE, "MPOL_LOCAL": unix.MPOL_LOCAL}
	for p := prog.Policy(0); int(p) < prog.NumPolicies; p++ {
		d := p.Info()
		if v, ok := mpol[d.Linux]; !ok || v != d.Value {
			t.Errorf("policy %v: %s is %d (known %v), the table says %d", p, d.Linux, v, ok, d.Value)
		}
	}
	if prSetVMA != unix.PR_SET_VMA || prSetVMAAnonName != unix.PR_SET_VMA_ANON_NAME || mlockOnfault != unix.MLOCK_ONFAULT {
		t.Errorf("PR_SET_VMA %#x, PR_SET_VMA_ANON_NAME %d, MLOCK_ONFAULT %d differ from x/sys/unix", prSetVMA, prSetVMAAnonName, mlockOnfault)
	}
	mremap := map[string]int{"MREMAP_MAYMOVE": unix.MREMAP_MAYMOVE, "MREMAP_FIXED": unix.MREMAP_FIXED, "MREMAP_DONTUNMAP": unix.MREMAP_DONTUNMAP}
	for _, d := range prog.MremapFlagInfos() {
		if v, ok := mremap[d.Linux]; !ok || v != d.Value {
			t.Errorf("mremap flag %s: %s is %d (known %v), the table says %d", d.Name, d.Linux, v, ok, d.Value)
		}
	}
}

// The executor runs every operation kind: each kind's example program runs
// without an "unhandled" skip (a kind may still be skipped because the
// kernel lacks a feature, which the reason says).
func TestEveryOpKindHandled(t *testing.T) {
	for k := prog.OpKind(0); int(k) < prog.NumOpKinds; k++ {
		p := prog.Example(k)
		o, err := executor(t).Run(p, Options{})
		if err != nil {
			t.Errorf("%v: %v", k, err)
			continue
		}
		for i, op := range p.Ops {
			r := o.Ops[i]
			if op.Kind != k {
				continue
			}
			if !r.Ran {
				t.Errorf("%v: op %d did not run", k, i)
			}
			if strings.Contains(r.Skip, "unhandled") {
				t.Errorf("%v: op %d: %s", k, i, r.Skip)
			} else if r.Skip != "" {
				t.Logf("%v: skipped here: %s", k, r.Skip)
			}
		}
	}
	// And a kind it does not know is refused or reported as unhandled,
	// never run silently as nothing.
	p := prog.Example(prog.OpCheck)
	p.Ops[len(p.Ops)-1].Kind = prog.OpKind(prog.NumOpKinds)
	o, err := executor(t).Run(p, Options{})
	if err == nil {
		if r := o.Ops[len(p.Ops)-1]; !strings.Contains(r.Skip, "unhandled") {
			t.Errorf("an unknown kind ran without a word: %+v", r)
		}
	} else {
		t.Logf("an unknown kind is refused: %v", err)
	}
	if got := obs.SkipReason(obs.SkipUnhandled, uint64(unix.ENOSYS)); !strings.Contains(got, "unhandled") {
		t.Errorf("the unhandled reason reads %q", got)
	}
}
