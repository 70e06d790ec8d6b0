package reproc

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// emitLayout writes fuzz/prog's layout constants and the bounds of every
// array the runtime indexes by a program value (regions, forks, threads,
// pipes, a thread's queue of ops), so runtime.c.in holds no copy of them.
func emitLayout(b *bytes.Buffer) {
	fmt.Fprintf(b, "\n/* Layout (fuzz/prog). */\n")
	fmt.Fprintf(b, "#define PAGE %dULL\n#define SPAN_PAGES %d\n#define CANON_ARENA %#xULL /* where the model's addresses put region r0 */\n",
		prog.PageSize, prog.SpanPages, uint64(prog.ArenaBase))
	fmt.Fprintf(b, "#define MAX_REGIONS %d\n#define MAX_FORKS %d\n#define MAX_THREADS %d\n#define MAX_PIPES %d\n#define MAX_LOOP_WRITES %d\n#define MAX_OPS %d\n",
		prog.MaxRegions, prog.MaxForks, prog.MaxThreads, prog.MaxPipes, prog.MaxLoopWrites, prog.MaxOps)
}

// emitEnums writes, from fuzz/prog's descriptor tables, every value table
// the runtime indexes by an enum value of a program (advice, protection,
// region kind, THP advice, mremap flag bits, mbind policy, anonymous VMA
// name), each with its count and a
// _Static_assert that the table has exactly that many entries. Where the
// C headers define a Linux constant, a _Static_assert checks the table's
// value against it.
func emitEnums(b *bytes.Buffer) {
	b.WriteString("\n/* fuzz/prog's enums, from its descriptor tables (enums.go): index = the program's value. */\n")

	fmt.Fprintf(b, "#define NUM_ADVICES %d\nstatic const int ADVICE_LINUX[] = {\n", prog.NumAdvices)
	for _, a := range prog.Advices() {
		d := a.Info()
		fmt.Fprintf(b, "\t%d, /* %s: %s */\n", d.Value, d.Name, d.Linux)
	}
	b.WriteString("};\n")
	staticLen(b, "ADVICE_LINUX", "NUM_ADVICES", "one value per prog.Advice")
	for _, a := range prog.Advices() {
		d := a.Info()
		fmt.Fprintf(b, "#ifdef %s\n_Static_assert(%s == %d, %s);\n#endif\n", d.Linux, d.Linux, d.Value, cstr("prog: advice "+d.Name+" is "+d.Linux))
	}

	fmt.Fprintf(b, "#define NUM_PROTS %d\nstatic const int PROT_LINUX[] = {\n", prog.NumProts)
	for p := prog.Prot(0); int(p) < prog.NumProts; p++ {
		d := p.Info()
		fmt.Fprintf(b, "\t%d, /* %s: %s */\n", d.Value, d.Name, d.Linux)
	}
	b.WriteString("};\n")
	staticLen(b, "PROT_LINUX", "NUM_PROTS", "one value per prog.Prot")
	for p := prog.Prot(0); int(p) < prog.NumProts; p++ {
		d := p.Info()
		fmt.Fprintf(b, "_Static_assert((%s) == %d, %s);\n", d.Linux, d.Value, cstr("prog: prot "+d.Name+" is "+d.Linux))
	}

	fmt.Fprintf(b, "struct regionkind { int shared, memfd, hugetlb, fs; };\n#define NUM_REGION_KINDS %d\nstatic const struct regionkind REGION_KINDS[] = {\n", prog.NumRegionKinds)
	for k := prog.RegionKind(0); int(k) < prog.NumRegionKinds; k++ {
		d := k.Info()
		fmt.Fprintf(b, "\t{%d, %d, %d, %d}, /* %s: %s */\n", b2i(d.Shared), b2i(d.Memfd), b2i(d.Hugetlb), d.FS, d.Name, d.Linux)
	}
	b.WriteString("};\n")
	staticLen(b, "REGION_KINDS", "NUM_REGION_KINDS", "one entry per prog.RegionKind")

	// The file systems of the file kinds: where the executor looks for a
	// directory (executor.FileDir), the same order here.
	fmt.Fprintf(b, "struct filesystem { const char *name, *env; long magic; };\n#define NUM_FS %d\nstatic const struct filesystem FILE_SYSTEMS[] = {\n", prog.NumFS)
	for f := prog.FS(0); int(f) < prog.NumFS; f++ {
		d := f.Info()
		env := "0"
		if d.Name != "" {
			env = cstr(executor.FSDirEnv(f))
		}
		fmt.Fprintf(b, "\t{%s, %s, %#x},\n", cstr(d.Name), env, d.Magic)
	}
	b.WriteString("};\n")
	staticLen(b, "FILE_SYSTEMS", "NUM_FS", "one entry per prog.FS")
	fmt.Fprintf(b, "#define GUEST_EXT4_DIR %s\n", cstr(executor.GuestExt4Dir))

	fmt.Fprintf(b, "#define NUM_THPS %d\nstatic const int THP_ADVICE[] = { /* the madvise at creation, -1: none */\n", prog.NumTHPs)
	for t := prog.THP(0); int(t) < prog.NumTHPs; t++ {
		d := t.Info()
		linux := d.Linux
		if linux == "" {
			linux = "none"
		}
		fmt.Fprintf(b, "\t%s, /* %s: %s */\n", thpAdvice(d), d.Name, linux)
	}
	b.WriteString("};\n")
	staticLen(b, "THP_ADVICE", "NUM_THPS", "one value per prog.THP")

	fmt.Fprintf(b, "struct flagbit { int bit, value; }; /* a prog.MremapFlags bit, its Linux value */\n#define NUM_MREMAP_FLAGS %d\nstatic const struct flagbit MREMAP_FLAG_BITS[] = {\n", prog.NumMremapFlags)
	for _, d := range prog.MremapFlagInfos() {
		fmt.Fprintf(b, "\t{%#x, %d}, /* %s: %s */\n", int(d.Flag), d.Value, d.Name, d.Linux)
	}
	b.WriteString("};\n")
	staticLen(b, "MREMAP_FLAG_BITS", "NUM_MREMAP_FLAGS", "one entry per prog.MremapFlags bit")
	for _, d := range prog.MremapFlagInfos() {
		fmt.Fprintf(b, "#ifdef %s\n_Static_assert(%s == %d, %s);\n#endif\n", d.Linux, d.Linux, d.Value, cstr("prog: mremap flag "+d.Name+" is "+d.Linux))
	}
	fmt.Fprintf(b, "#define MREMAP_FLAG_FIXED %#x /* the target is op.to, op.tooff */\n", int(prog.MremapFixed))

	fmt.Fprintf(b, "struct policy { int mode, node0; }; /* mbind: MPOL_ value, nodemask {0} (else none) */\n#define NUM_POLICIES %d\nstatic const struct policy POLICIES[] = {\n", prog.NumPolicies)
	for p := prog.Policy(0); int(p) < prog.NumPolicies; p++ {
		d := p.Info()
		fmt.Fprintf(b, "\t{%d, %d}, /* %s: %s */\n", d.Value, b2i(d.Node0), d.Name, d.Linux)
	}
	b.WriteString("};\n")
	staticLen(b, "POLICIES", "NUM_POLICIES", "one entry per prog.Policy")
	for p := prog.Policy(0); int(p) < prog.NumPolicies; p++ {
		d := p.Info()
		fmt.Fprintf(b, "#ifdef %s\n_Static_assert(%s == %d, %s);\n#endif\n", d.Linux, d.Linux, d.Value, cstr("prog: policy "+d.Name+" is "+d.Linux))
	}

	fmt.Fprintf(b, "#define NUM_ANON_NAMES %d\nstatic const char *const ANON_NAMES[] = { /* PR_SET_VMA_ANON_NAME; NULL removes the name */\n", prog.NumAnonNames)
	for n := prog.AnonName(0); int(n) < prog.NumAnonNames; n++ {
		d := n.Info()
		v := "NULL"
		if d.Linux != "" {
			v = cstr(d.Linux)
		}
		fmt.Fprintf(b, "\t%s, /* %s */\n", v, d.Name)
	}
	b.WriteString("};\n")
	staticLen(b, "ANON_NAMES", "NUM_ANON_NAMES", "one entry per prog.AnonName")
}

func staticLen(b *bytes.Buffer, table, count, what string) {
	fmt.Fprintf(b, "_Static_assert(sizeof %s / sizeof %s[0] == %s, %s);\n", table, table, count, cstr(table+": "+what))
}

// thpAdvice is the C value of a THP's advice at creation: -1 for none, the
// advice table's value of its MADV_ constant, or else the constant's name
// (which the C headers must then define: a compile error, never a silent
// wrong value).
func thpAdvice(d prog.THPInfo) string {
	if d.Linux == "" {
		return "-1"
	}
	for _, a := range prog.Advices() {
		if a.Info().Linux == d.Linux {
			return fmt.Sprint(a.Info().Value)
		}
	}
	return strings.TrimSpace(d.Linux)
}
