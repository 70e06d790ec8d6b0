package prog

import (
	"fmt"
	"testing"
)

// Every value of every enum has a descriptor with a unique name, and the
// tables agree with the counts every interpreter's test iterates.
func TestDescriptorTables(t *testing.T) {
	unique := func(what string, names []string, n int) {
		t.Helper()
		if len(names) != n {
			t.Errorf("%s: %d names for %d values", what, len(names), n)
		}
		seen := map[string]int{}
		for i, name := range names {
			if name == "" {
				t.Errorf("%s value %d has no descriptor", what, i)
			} else if j, dup := seen[name]; dup {
				t.Errorf("%s values %d and %d are both %q", what, j, i, name)
			}
			seen[name] = i
		}
	}
	unique("OpKind", opNames, NumOpKinds)
	unique("Advice", adviceNames, NumAdvices)
	unique("RegionKind", regionKindNames, NumRegionKinds)
	unique("THP", thpNames, NumTHPs)
	unique("Prot", protNames, NumProts)
	unique("MremapFlags", names(mremapFlagTable[:], func(d MremapFlagInfo) string { return d.Name }), NumMremapFlags)
	for _, a := range Advices() {
		if d := a.Info(); d.Linux == "" || d.Value <= 0 {
			t.Errorf("advice %v: no Linux constant (%+v)", a, d)
		}
	}
	if v := Advice(NumAdvices).Info().Value; v != -1 {
		t.Errorf("an advice out of range has Linux value %d, want -1", v)
	}
	all := MremapFlags(0)
	for _, d := range mremapFlagTable {
		all |= d.Flag
		if d.Flag.Linux() != d.Value {
			t.Errorf("mremap flag %s: Linux() %d, want %d", d.Name, d.Flag.Linux(), d.Value)
		}
	}
	if all != mremapAll {
		t.Errorf("the mremap flag table covers %#x, the flags are %#x", all, mremapAll)
	}
	if (mremapAll + 1).Linux() != -1 {
		t.Error("an unnamed mremap flag bit has a Linux value")
	}
}

// Every operation kind's example is a valid program that uses the kind,
// and its properties agree with what the format and validation expect.
func TestOpExamples(t *testing.T) {
	for _, k := range OpKinds() {
		d := k.Info()
		if d.Example == "" {
			t.Errorf("%v: no example", k)
			continue
		}
		p := Example(k)
		if err := p.Validate(); err != nil {
			t.Errorf("%v: example does not validate: %v", k, err)
		}
		uses := false
		for _, op := range p.Ops {
			uses = uses || op.Kind == k
		}
		if !uses {
			t.Errorf("%v: example does not use it:\n%s", k, p.Format())
		}
		if d.Range && d.IORange {
			t.Errorf("%v: both a mapping range and an I/O range", k)
		}
		if d.Pinned && d.Range {
			t.Errorf("%v: pinned operations do not change mappings", k)
		}
	}
	if s := OpKind(NumOpKinds).String(); s != fmt.Sprintf("op(%d)", NumOpKinds) {
		t.Errorf("a kind out of range prints as %q", s)
	}
}
