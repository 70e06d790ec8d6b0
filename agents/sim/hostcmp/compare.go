package hostcmp

import (
	"fmt"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Compare returns the differences between two observations of p (empty:
// they agree). It ignores fork pids, timestamps, inode numbers (only
// whether a VMA is file-backed), addresses outside the arena, whether
// MADV_COLLAPSE succeeded and where adjacent equal anonymous VMAs were
// merged.
func Compare(p *prog.Program, a, b *obs.Observation) []string {
	var out []string
	for _, x := range Diffs(p, a, b) {
		out = append(out, x.Text)
	}
	return out
}

// Diff is one difference between two observations: Class groups
// differences of one kind (the operation kind and both errnos, or which
// part of which view), Text says where and what.
type Diff struct {
	Class string
	Text  string
}

// Diffs is Compare with a class per difference (at most 20).
func Diffs(p *prog.Program, a, b *obs.Observation) []Diff {
	var d []Diff
	class := ""
	add := func(format string, args ...any) {
		if len(d) < 20 {
			d = append(d, Diff{Class: class, Text: fmt.Sprintf(format, args...)})
		}
	}
	for i := range p.Ops {
		x, y := a.Ops[i], b.Ops[i]
		if x.Skip != "" && y.Skip == "" {
			// The kernel's target did not run it (a capability it lacks,
			// e.g. CONFIG_ANON_VMA_NAME): the simulated kernel, which
			// has every capability, has nothing to be compared with.
			continue
		}
		if op := &p.Ops[i]; op.Kind == prog.OpMadvise && op.Advice == prog.AdvCollapse {
			// Whether MADV_COLLAPSE succeeds depends on THP availability
			// (the reference model leaves it unpredictable too); it
			// never changes content.
			y.Errno = x.Errno
		}
		if x.Ran != y.Ran || x.Errno != y.Errno || x.Skipped != y.Skipped {
			switch kind := p.Ops[i].Kind; {
			case x.Ran != y.Ran:
				class = fmt.Sprintf("op:%s:ran %v/%v", kind, x.Ran, y.Ran)
			case x.Errno != y.Errno:
				class = fmt.Sprintf("op:%s:errno %s/%s", kind, errnoName(x.Errno), errnoName(y.Errno))
			default:
				class = fmt.Sprintf("op:%s:skipped slots", kind)
			}
			add("op %d %v: ran %v/%v errno %d/%d skipped %d/%d", i, p.Ops[i], x.Ran, y.Ran, x.Errno, y.Errno, x.Skipped, y.Skipped)
			continue
		}
		switch p.Ops[i].Kind {
		case prog.OpWait:
			class = "op:wait:status"
			if x.Ret != y.Ret {
				add("op %d %v: ret %d/%d", i, p.Ops[i], x.Ret, y.Ret)
			}
		case prog.OpMremap, prog.OpMmap:
			class = fmt.Sprintf("op:%s:address", p.Ops[i].Kind)
			if x.Errno == 0 && (prog.InArena(x.Ret) || prog.InArena(y.Ret)) && x.Ret != y.Ret {
				add("op %d %v: ret %#x/%#x", i, p.Ops[i], x.Ret, y.Ret)
			}
		}
	}
	if len(a.Views) != len(b.Views) {
		class = "views:count"
		add("views: %d/%d", len(a.Views), len(b.Views))
		return d
	}
	for vi := range a.Views {
		x, y := &a.Views[vi], &b.Views[vi]
		where := fmt.Sprintf("view %d (proc %d at %d)", vi, x.Proc, x.At)
		vclass := func(what string) string { return "view:" + what + ":" + viewKind(x) }
		if x.Proc != y.Proc || x.At != y.At {
			class = "views:order"
			add("%s: other is proc %d at %d", where, y.Proc, y.At)
			continue
		}
		if fmt.Sprint(vmas(x.VMAs)) != fmt.Sprint(vmas(y.VMAs)) {
			class = vclass("vmas")
			add("%s: vmas\n  %v\n  %v", where, vmas(x.VMAs), vmas(y.VMAs))
		}
		if fmt.Sprint(x.Runs) != fmt.Sprint(y.Runs) {
			class = vclass("runs")
			add("%s: runs\n  %v\n  %v", where, x.Runs, y.Runs)
		}
		wx, wy := words(x), words(y)
		class = vclass("words")
		n := 0
		for k, v := range wx {
			if wy[k] != v && n < 5 {
				n++
				add("%s: r%d+%#x = %s / %s", where, k.r, k.off, val(v), val(wy[k]))
			}
		}
		for k, v := range wy {
			if _, ok := wx[k]; !ok && n < 5 {
				n++
				add("%s: r%d+%#x = %s / %s", where, k.r, k.off, val(0), val(v))
			}
		}
		if n == 0 && fmt.Sprint(x.Pages) != fmt.Sprint(y.Pages) {
			class = vclass("digests")
			add("%s: page digests differ", where)
		}
	}
	return d
}

// viewKind names a view's place without operation indexes: "main-check",
// "main-end", "child-start", "child-check" (a grandchild is a child).
func viewKind(v *obs.View) string {
	who := "main"
	if v.Proc > 0 {
		who = "child"
	}
	switch v.At {
	case obs.AtStart:
		return who + "-start"
	case obs.AtEnd:
		return who + "-end"
	}
	return who + "-check"
}

// errnoName is an errno's symbolic name ("0" for none).
func errnoName(e int) string {
	if e == 0 {
		return "0"
	}
	if n := unix.ErrnoName(unix.Errno(e)); n != "" {
		return n
	}
	return fmt.Sprint(e)
}

type key struct {
	r   int
	off uint64
}

func words(v *obs.View) map[key]uint64 {
	m := make(map[key]uint64, len(v.Words))
	for _, w := range v.Words {
		m[key{w.Region, w.Off}] = w.Value
	}
	return m
}

func val(v uint64) string {
	if v == 0 {
		return "0"
	}
	if op, k, ok := prog.DecodeSlotValue(v); ok {
		return fmt.Sprintf("op%d[%d]", op, k)
	}
	return fmt.Sprintf("%#x", v)
}

// vmas renders VMAs for comparison. Adjacent anonymous VMAs with the same
// protection are joined first: whether Linux merges them depends on
// anon_vma chains the simulator approximates, and the reference model
// accepts either (a boundary between equal segments may or may not be
// there).
func vmas(vs []obs.VMA) []string {
	var joined []obs.VMA
	for _, v := range vs {
		if n := len(joined); n > 0 && v.Inode == 0 && joined[n-1].Inode == 0 && joined[n-1].End == v.Start && joined[n-1].Prot == v.Prot {
			joined[n-1].End = v.End
			continue
		}
		joined = append(joined, v)
	}
	var out []string
	for _, v := range joined {
		file := ""
		if v.Inode != 0 {
			file = fmt.Sprintf(" off=%#x file", v.Offset)
		}
		out = append(out, fmt.Sprintf("%#x-%#x %s%s", v.Start, v.End, v.Prot, file))
	}
	sort.Strings(out)
	return out
}

// Lacks is what the target kernel cannot do that the simulated one can,
// as its run of p shows it: the operation kinds of
// prog/vmaops.go the executor skipped (no CONFIG_ANON_VMA_NAME, say),
// with its reason.
func Lacks(p *prog.Program, o *obs.Observation) map[prog.OpKind]string {
	out := map[prog.OpKind]string{}
	for i, r := range o.Ops {
		switch k := p.Ops[i].Kind; k {
		case prog.OpMbind, prog.OpAnonName, prog.OpPMadvise, prog.OpUffdReg, prog.OpUffdUnreg:
			if r.Skip != "" {
				out[k] = r.Skip
			}
		}
	}
	return out
}
