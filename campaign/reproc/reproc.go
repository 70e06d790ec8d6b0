// Package reproc translates a forkfuzz program into a standalone C
// program (no Go, no forkfuzz) that performs it with raw system calls and
// checks what every process sees against the reference model's
// prediction, embedded as C tables.
//
// The tables come from checker.NewSpec: for every operation the errnos the
// model accepts (and the result it assumed), for every view the page
// states, protections, file offsets and page contents it accepts, with
// its doubts explicit (unknown ranges, MADV_FREE alternatives, words a
// thread may write). Where Linux leaves a choice and the run takes
// another path than the one the model's expectations follow (an allowed
// alternative errno, a kernel-chosen mremap address inside the arena, a
// missing O_DIRECT, io_uring or userfaultfd feature), the reproducer says
// so and stops judging: it never reports a divergence it cannot judge as
// a failure. A fork with fault injection or a memory-cgroup limit that
// fails is not a divergence: the parent's mappings must be unchanged, and
// the reproducer goes on with a second set of tables, the expectations of
// a run in which that fork failed (checker.NewSpecFailing). A fork with
// childfail is armed in the child's own context (held off the CPU,
// stopped, its fail-nth written); a child that dies there must die of
// SIGKILL, and the reproducer goes on with the expectations of a run in
// which that child never ran (checker.NewSpecCopyKilled); child_oom
// likewise, the child born into a limited memory cgroup of its own. With
// Options.ForkImpl the reproducer switches a fork implementation on for
// itself first and checks each fork of the main process for the deferred
// copy (agents/forkimpl profiles; the executor's probe page).
//
// A program with recorded fault sites (Options.Sites: where the finding's
// run failed its fail_nth forks) reads the kernel's fault report and runs
// itself again with K moved until the fault hits the site (docs/rollback.md);
// none hitting it is undecided (exit 3).
//
// The reproducer prints "FAIL: ..." lines naming the process, operation or
// view, page, expected and actual value, and exits 1 on a failure, 0
// otherwise, 2 when it cannot set the program up (or a fork
// implementation is missing or did not take effect), 3 (undecided: never a
// pass) when the run left the model's predicted path before any failure. It builds with
// `gcc -O2 -static -pthread repro.c`.
//
// Every operation kind is translated. Not checked: the consistent-cut oracle
// of child snapshots taken while threads store (those words are skipped
// as the model's wild words), page-table and rollback measurements
// beyond "a failed injected fork leaves the parent's mappings unchanged",
// kernel reports.
package reproc

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/forkimpl"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

//go:embed runtime.c.in
var runtimeC string

// Options tune a translation.
type Options struct {
	// Kernel is the release (uname -r) the reproducer is meant for; the
	// model follows it where Linux changed behaviour (empty: the newest).
	Kernel string
	// ForkImpl is the fork-implementation profile (agents/forkimpl) the
	// reproducer switches on for itself and its children before the
	// program, as the executor does ("": the kernel's fork as it is). With
	// a deferring profile every fork of the main process is checked for
	// the deferred copy; a kernel without the knob, or a fork that copied
	// eagerly, makes the reproducer say so (exit 2, not a pass).
	ForkImpl string
	// Mutate, TEST ONLY, falsifies the embedded expectation to prove that
	// the checks bite: "errno" makes the first judged operation expect
	// another errno, "skipped" makes the first store expect one more
	// skipped slot, "word" changes the first expected non-zero word of a
	// view, "state" makes the first expected mapped run unmapped, "prot"
	// flips the expected write permission of the first known mapping,
	// "exit" makes the first wait expect a killed child (or a normal exit
	// for a killed one), "pipe" changes the first expected word a readpipe
	// reads.
	Mutate string
	// Sites are where the finding's run injected its forks' faults
	// (fail_nth of main-process forks; a corpus file's site directive,
	// "*" for any allocation): the reproducer reads the kernel's
	// fault-injection report, and a run whose fault hit another
	// allocation (or whose fork did not fail) runs again with the fork's
	// K moved, as the gate aims a program; no K hitting the site is
	// UNDECIDED (exit 3), never ok.
	Sites []Site
}

// Site is one fork's recorded fault site: the fork operation (an index
// into the program's Ops), whether the fault is the child's (childfail;
// obs.ChildFault.Site) or the fork's own (fail_nth; obs.Rollback.Site),
// and the kernel's report of it.
type Site struct {
	Op    int
	Child bool
	Site  string
}

// Mutations lists the test-only expectation mutations.
func Mutations() []string {
	return []string{"errno", "skipped", "word", "state", "prot", "exit", "pipe"}
}

// Translate returns the C reproducer of p.
func Translate(p *prog.Program, opt Options) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid program: %w", err)
	}
	var impl *forkimpl.Profile
	if opt.ForkImpl != "" {
		var err error
		if impl, err = forkimpl.Lookup(opt.ForkImpl); err != nil {
			return nil, err
		}
	}
	spec, err := checker.NewSpec(p, opt.Kernel)
	if err != nil {
		return nil, err
	}
	if len(spec.Findings) > 0 {
		return nil, fmt.Errorf("the model rejects its own expected run of this program (%s): cannot build a reproducer", spec.Findings[0].Signature)
	}
	for _, st := range opt.Sites {
		if st.Op < 0 || st.Op >= len(p.Ops) || p.Ops[st.Op].Kind != prog.OpFork || p.Ops[st.Op].Proc != 0 {
			return nil, fmt.Errorf("fault site of op %d: not a fork of the main process", st.Op)
		}
		if op := p.Ops[st.Op]; !st.Child && op.FailNth <= 0 || st.Child && op.ChildFail <= 0 {
			return nil, fmt.Errorf("fault site of op %d: the fork has no %s", st.Op, map[bool]string{false: "fail_nth", true: "childfail"}[st.Child])
		}
		if st.Site == "" {
			return nil, fmt.Errorf("fault site of op %d: empty", st.Op)
		}
	}
	g := &gen{p: p, s: spec, impl: impl, sites: opt.Sites}
	if err := g.mutate(opt.Mutate); err != nil {
		return nil, err
	}
	// A fork with fault injection or a memory-cgroup limit may fail: then
	// the reproducer goes on with the expectations of a run in which it
	// failed (one set of tables per such fork).
	for i, op := range p.Ops {
		if op.Kind != prog.OpFork || op.Proc != 0 || (op.FailNth == 0 && op.OOMMemcg == 0) {
			continue
		}
		alt, err := checker.NewSpecFailing(p, opt.Kernel, i)
		if err != nil {
			return nil, err
		}
		if len(alt.Findings) > 0 {
			continue // no expectations for that branch: the reproducer stops judging there
		}
		g.alts = append(g.alts, alt)
		g.altOps = append(g.altOps, i)
		g.altKill = append(g.altKill, false)
	}
	// A childfail fork's child may die of its failed copy (SIGKILL
	// before user space): then the reproducer goes on with the
	// expectations of a run in which that child never ran.
	for i, op := range p.Ops {
		if op.Kind != prog.OpFork || op.Proc != 0 || (op.ChildFail == 0 && op.ChildOOM == 0) {
			continue
		}
		alt, err := checker.NewSpecCopyKilled(p, opt.Kernel, i)
		if err != nil {
			return nil, err
		}
		if len(alt.Findings) > 0 {
			continue
		}
		g.alts = append(g.alts, alt)
		g.altOps = append(g.altOps, i)
		g.altKill = append(g.altKill, true)
	}
	return g.emit(), nil
}

func opText(p *prog.Program, i int) string {
	lines := strings.Split(strings.TrimSpace(string(p.Format())), "\n")
	// Format: header line, one line per region, one per op.
	k := 1 + len(p.Regions) + i
	if k < len(lines) {
		return lines[k]
	}
	return p.Ops[i].Kind.String()
}

type gen struct {
	p *prog.Program
	s *checker.Spec
	// alts are the specs of runs in which fork altOps[k] fails.
	alts   []*checker.Spec
	altOps []int
	impl   *forkimpl.Profile // nil: none
	// altKill[k]: alts[k] is the run in which the child of fork
	// altOps[k] dies of its failed copy (childfail), not the fork failing.
	altKill []bool
	sites   []Site
}

func (g *gen) mutate(m string) error {
	switch m {
	case "":
		return nil
	case "errno":
		for i := range g.s.Ops {
			o := &g.s.Ops[i]
			if o.Judged && len(o.Errnos) == 1 && g.p.Ops[i].Thread == 0 {
				o.Errnos = []int{o.Errnos[0] + 1}
				o.Why = "MUTATED expectation (test only)"
				g.s.Expected.Ops[i].Errno = o.Errnos[0]
				return nil
			}
		}
	case "word":
		for vi := range g.s.Views {
			for pi := range g.s.Views[vi].Pages {
				ps := &g.s.Views[vi].Pages[pi]
				if !ps.Unknown && len(ps.Alts) == 1 && len(ps.Alts[0]) > 0 {
					w := append([]checker.WordVal(nil), ps.Alts[0]...)
					w[0].V ^= 1
					ps.Alts[0] = w
					return nil
				}
			}
		}
	case "skipped":
		for i, op := range g.p.Ops {
			o := g.s.Ops[i]
			if op.Kind == prog.OpStore && op.Thread == 0 && len(o.Errnos) == 1 && o.Errnos[0] == 0 {
				g.s.Expected.Ops[i].Skipped++
				return nil
			}
		}
	case "exit":
		for i, op := range g.p.Ops {
			o := g.s.Ops[i]
			if op.Kind == prog.OpWait && len(o.Errnos) == 1 && o.Errnos[0] == 0 {
				g.s.Expected.Ops[i].Ret ^= 9
				return nil
			}
		}
	case "prot":
		for vi := range g.s.Views {
			v := &g.s.Views[vi]
			for si := range v.Segs {
				if sg := &v.Segs[si]; !sg.Unknown && len(sg.Prot) == 4 {
					b := []byte(sg.Prot)
					if b[1] == 'w' {
						b[1] = '-'
					} else {
						b[1] = 'w'
					}
					sg.Prot = string(b)
					return nil
				}
			}
		}
	case "pipe":
		for i := range g.p.Ops {
			for pi := range g.s.Pipes[i] {
				pp := &g.s.Pipes[i][pi]
				if !pp.Unknown && len(pp.Alts) == 1 && len(pp.Alts[0]) > 0 {
					w := append([]checker.WordVal(nil), pp.Alts[0]...)
					w[0].V ^= 1
					pp.Alts[0] = w
					return nil
				}
			}
		}
	case "state":
		for vi := range g.s.Views {
			v := &g.s.Views[vi]
			for si := range v.Segs {
				if !v.Segs[si].Unknown {
					v.Segs = append(v.Segs[:si:si], v.Segs[si+1:]...)
					return nil
				}
			}
		}
	default:
		return fmt.Errorf("unknown mutation %q (want one of %s)", m, strings.Join(Mutations(), ", "))
	}
	return fmt.Errorf("mutation %q: the program has nothing to mutate", m)
}

func cstr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

const header = `/* forkfuzz C reproducer: generated by 'forkfuzz repro-c'. Standalone.
 * Build: gcc -O2 -static -pthread repro.c -o repro && ./repro
 * Exit status: 0 the run matched the reference model, 1 it did not (FAIL lines
 * say where), 2 the program could not be set up or not run as asked (a fork
 * implementation missing or not taking effect), 3 undecided (the run left the
 * model's predicted path before any failure: nothing after it was judged).
 *
 * The program:
%s */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/io_uring.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1
#endif
#ifndef MAP_HUGETLB
#define MAP_HUGETLB 0x40000
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif
#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)
#endif

struct region { int kind, pages, thp; const char *kindname; };
struct op {
	int proc, thread, kind, region;
	uint64_t off, len;
	int count;
	uint64_t stride;
	int prot, advice;
	uint64_t newlen;
	int flags, to;
	uint64_t tooff;
	int fork, peer, into, pipe, failnth;
	uint64_t oommemcg;
	int childfail;
	uint64_t childoom;
	int hold, policy, name;
	uint64_t pgoff;
	const char *text;
};
enum { RET_NONE, RET_EXACT, RET_KILLED, RET_EXIT0, RET_MREMAP };
struct opexp {
	int judged, loose, nerr, errs[8], exp_errno;
	uint64_t exp_ret;
	int exp_skipped, chk_skipped, chk_ret;
	const char *why;
};
struct word { uint16_t k; uint64_t v; };
struct alt { int first, n; };
struct seg { int region, first, n, unknown, readable, state; char prot[5]; int64_t fileoff; int content_unknown; };
struct pagespec { int region, page, unknown, alt0, nalt, wild0, nwild; };
struct viewspec { int proc, at, seg0, nseg, page0, npage; };
struct pipepage { int unknown, alt0, nalt, wild0, nwild, extra0, nextra; };
struct pipespec { int op, page0, npage; };
`

func (g *gen) emit() []byte {
	var b bytes.Buffer
	p, s := g.p, g.s
	progText := ""
	for _, l := range strings.Split(strings.TrimRight(string(p.Format()), "\n"), "\n") {
		progText += " *   " + strings.ReplaceAll(l, "*/", "* /") + "\n"
	}
	fmt.Fprintf(&b, header, progText)
	fmt.Fprintf(&b, "#define AT_START %d\n#define AT_END %d\n", obs.AtStart, obs.AtEnd)
	for _, k := range prog.OpKinds() {
		fmt.Fprintf(&b, "#define K_%s %d\n", strings.ToUpper(k.String()), int(k))
	}
	emitLayout(&b)
	emitEnums(&b)
	if p.Arena != prog.ArenaTop {
		fmt.Fprintf(&b, "#define ARENA %#xULL /* arena %v: the regions' real place; results are mapped back with CANON */\n", p.Arena.Base(), p.Arena)
	}
	fmt.Fprintf(&b, "\n#define NREGIONS %d\nstatic const struct region REGIONS[] = {\n", len(p.Regions))
	for _, r := range p.Regions {
		fmt.Fprintf(&b, "\t{%d, %d, %d, %s},\n", int(r.Kind), r.Pages, int(r.THP), cstr(r.Kind.String()))
	}
	b.WriteString("};\n")
	g.emitForkImpl(&b)
	g.emitSites(&b)
	var usesPipe [prog.MaxPipes]int
	scratch, memcg, failnth, ring, uffd, uffdm, numa := 0, 0, 0, 0, 0, 0, 0
	fmt.Fprintf(&b, "\n#define NOPS %d\nstatic const struct op OPS[] = {\n", len(p.Ops))
	for i, op := range p.Ops {
		fmt.Fprintf(&b, "\t{%d, %d, %d, %d, %#x, %#x, %d, %#x, %d, %d, %#x, %d, %d, %#x, %d, %d, %d, %d, %d, %#x, %d, %#x, %d, %d, %d, %#x, %s},\n",
			op.Proc, op.Thread, int(op.Kind), op.Region, op.Off, op.Len, op.Count, op.Stride, int(op.Prot), int(op.Advice),
			op.NewLen, int(op.Flags), op.To, op.ToOff, op.Fork, op.Peer, op.Into, op.Pipe, op.FailNth, op.OOMMemcg, op.ChildFail, op.ChildOOM, op.Hold,
			int(op.Policy), int(op.Name), op.PgOff, cstr(opText(p, i)))
		switch op.Kind {
		case prog.OpVmsplice, prog.OpReadPipe:
			usesPipe[op.Pipe] = 1
		case prog.OpODirect:
			scratch = 1
		case prog.OpUringReg:
			ring = 1
		case prog.OpUringRead:
			ring, scratch = 1, 1
		case prog.OpUffdWP:
			uffd = 1
		case prog.OpUffdReg, prog.OpUffdUnreg:
			uffdm = 1
		case prog.OpMigrate, prog.OpMigrateLoop:
			numa = 1
		case prog.OpFork:
			if op.OOMMemcg > 0 || op.ChildOOM > 0 {
				memcg = 1
			}
			if op.FailNth > 0 || op.ChildFail > 0 {
				failnth = 1
			}
		}
	}
	b.WriteString("};\n")
	pipesUsed := make([]string, len(usesPipe))
	for i, u := range usesPipe {
		pipesUsed[i] = fmt.Sprint(u)
	}
	fmt.Fprintf(&b, "static const int USES_PIPE[MAX_PIPES] = {%s};\n#define USES_SCRATCH %d\n#define USES_MEMCG %d\n#define USES_FAILNTH %d\n#define USES_RING %d\n#define USES_UFFD %d\n#define USES_UFFDM %d\n#define USES_NUMA %d\n#define MAX_MIGRATE_PAGES %d\n",
		strings.Join(pipesUsed, ", "), scratch, memcg, failnth, ring, uffd, uffdm, numa, prog.MaxMigratePages)

	var t tables
	sets := append([]*checker.Spec{s}, g.alts...)
	for k, sp := range sets {
		t.set(g.p, sp, k)
	}
	// A dummy last element keeps every array non-empty.
	fmt.Fprintf(&b, "\nstatic const struct word W[] = {%s{0,0}};\n", t.words.String())
	fmt.Fprintf(&b, "static const struct alt ALTS[] = {%s{0,0}};\n", t.alts.String())
	fmt.Fprintf(&b, "static const uint16_t WILD[] = {%s0};\n", t.wild.String())
	fmt.Fprintf(&b, "static const struct seg SEGS[] = {\n%s\t{0}};\n", t.segs.String())
	fmt.Fprintf(&b, "static const struct pagespec PAGES[] = {\n%s\t{0}};\n", t.pages.String())
	fmt.Fprintf(&b, "static const struct pipepage PIPEPAGES[] = {\n%s\t{0}};\n", t.ppages.String())
	b.Write(t.sets.Bytes())
	// failop: the fork that fails in this set's run; killop: the fork
	// whose child dies of its failed copy (-1: none).
	fmt.Fprintf(&b, "struct tableset { int failop, killop; const struct opexp *exp; const struct viewspec *views; int nviews; const struct pipespec *pipes; int npipes; };\n")
	fmt.Fprintf(&b, "#define NSETS %d\nstatic const struct tableset SETS[] = {\n", len(sets))
	for k, sp := range sets {
		fail, kill := -1, -1
		if k > 0 && g.altKill[k-1] {
			kill = g.altOps[k-1]
		} else if k > 0 {
			fail = g.altOps[k-1]
		}
		fmt.Fprintf(&b, "\t{%d, %d, EXP_%d, VIEWS_%d, %d, PIPESPECS_%d, %d},\n", fail, kill, k, k, len(sp.Views), k, t.npipes[k])
	}
	b.WriteString("};\n\n")
	b.WriteString(runtimeC)
	return b.Bytes()
}

// emitForkImpl writes the fork-implementation profile's definitions:
// FORK_IMPL (its name, "" for none), FORK_IMPL_KNOB, FORK_IMPL_DEFERRED
// and its steps, FISTEPS.
func (g *gen) emitForkImpl(b *bytes.Buffer) {
	name, knob, deferred := "", "", 0
	var steps []forkimpl.Step
	if g.impl != nil {
		name, knob, steps = g.impl.Name, g.impl.Knob, g.impl.Steps
		deferred = b2i(obs.DeferredProfile(name))
	}
	fmt.Fprintf(b, "\n#define FORK_IMPL %s\n#define FORK_IMPL_KNOB %s\n#define FORK_IMPL_DEFERRED %d\n", cstr(name), cstr(knob), deferred)
	b.WriteString("struct fistep { const char *kind, *path, *value; unsigned long args[5]; int ifpresent; };\nstatic const struct fistep FISTEPS[] = {\n")
	for _, st := range steps {
		var a [5]uintptr
		copy(a[:], st.Args)
		fmt.Fprintf(b, "\t{%s, %s, %s, {%#x, %#x, %#x, %#x, %#x}, %d},\n", cstr(st.Kind), cstr(st.Path), cstr(st.Value), a[0], a[1], a[2], a[3], a[4], b2i(st.IfPresent))
	}
	fmt.Fprintf(b, "\t{0}};\n#define NFISTEPS %d\n", len(steps))
}

// emitSites writes SITES (the recorded fault sites) and FAULT_PLUMBING
// (the frames a site summary skips, executor.FaultPlumbing).
func (g *gen) emitSites(b *bytes.Buffer) {
	b.WriteString("\nstruct site { int op, child; const char *site; };\nstatic const struct site SITES[] = {\n")
	for _, st := range g.sites {
		fmt.Fprintf(b, "\t{%d, %d, %s},\n", st.Op, b2i(st.Child), cstr(st.Site))
	}
	fmt.Fprintf(b, "\t{-1, 0, 0}};\n#define NSITES %d\n#define AIM_WINDOW %d\n#define FAULT_PLUMBING", len(g.sites), corpus.AimWindow)
	for i, f := range executor.FaultPlumbing {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + cstr(f))
	}
	b.WriteString("\n")
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// ForFinding is the reproducer of a finding: of its minimized program
// (with its observation) if there is one, else of the program, for the
// kernel release the observation came from.
func ForFinding(minimized, program *prog.Program, minObs, o *obs.Observation) ([]byte, error) {
	p := program
	if minimized != nil {
		p, o = minimized, minObs
	}
	if p == nil {
		return nil, fmt.Errorf("no program")
	}
	opt := Options{Sites: SitesOf(p, o)}
	if o != nil {
		opt.Kernel = o.Kernel
		if o.ForkImpl != nil {
			opt.ForkImpl = o.ForkImpl.Profile
		}
	}
	return Translate(p, opt)
}

// SitesOf is where run o of p injected the faults of p's main-process
// forks, fail_nth and childfail, as the kernel reported them
// (obs.Rollback.Site, obs.ChildFault.Site): the sites a reproducer of the
// finding aims at.
func SitesOf(p *prog.Program, o *obs.Observation) []Site {
	if o == nil {
		return nil
	}
	var out []Site
	for _, rb := range o.Rollbacks {
		if rb.Op < 0 || rb.Op >= len(p.Ops) {
			continue
		}
		op := p.Ops[rb.Op]
		if op.Kind != prog.OpFork || op.Proc != 0 {
			continue
		}
		if rb.Cause == obs.CauseFailNth && rb.Injection == obs.InjInjected && rb.Site != "" && op.FailNth > 0 {
			out = append(out, Site{Op: rb.Op, Site: rb.Site})
		}
		if c := rb.Child; c != nil && c.FailNth > 0 && c.Injection == obs.InjInjected && c.Site != "" && op.ChildFail > 0 {
			out = append(out, Site{Op: rb.Op, Child: true, Site: c.Site})
		}
	}
	return out
}

// resultSensitive reports whether the model's state after an operation it
// does not predict depends on the result it saw (then the reproducer stops
// judging when the result differs from the one the expectations assumed).
func resultSensitive(op prog.Op) bool {
	switch op.Kind {
	case prog.OpFork, prog.OpMremap, prog.OpUringReg, prog.OpUffdWP:
		return true
	case prog.OpProcMem, prog.OpPVWrite, prog.OpODirect:
		return op.Thread > 0 // a thread's pinned write settles at its join by its result
	}
	return false
}

// tables accumulates the shared C arrays (words, alternatives, segments,
// pages) and, per set of expectations, the EXP_k, VIEWS_k and PIPESPECS_k
// arrays.
type tables struct {
	words, alts, wild, segs, pages, ppages, sets bytes.Buffer

	nw, na, nwild, nseg, npage, npp int
	npipes                          []int
}

func (t *tables) set(p *prog.Program, sp *checker.Spec, k int) {
	b := &t.sets
	// Operation expectations.
	fmt.Fprintf(b, "\nstatic const struct opexp EXP_%d[] = {\n", k)
	for i, op := range p.Ops {
		t.opExp(op, sp.Ops[i], sp.Expected.Ops[i])
	}
	b.WriteString("};\n")

	// Words, alternatives, wild words, segments, pages, views, pipes.
	var views, pspecs bytes.Buffer
	for _, v := range sp.Views {
		t.view(&views, v)
	}
	nps := 0
	for i := range p.Ops {
		pp, ok := sp.Pipes[i]
		if !ok {
			continue
		}
		p0 := t.npp
		for _, x := range pp {
			a0 := t.na
			for _, a := range x.Alts {
				t.addAlt(a)
			}
			w0, wn := t.addWild(x.Wild)
			e0 := t.nw
			for _, wv := range x.Extra {
				fmt.Fprintf(&t.words, "{%d,%#x},", wv.K, wv.V)
				t.nw++
			}
			fmt.Fprintf(&t.ppages, "\t{%d, %d, %d, %d, %d, %d, %d},\n", b2i(x.Unknown), a0, len(x.Alts), w0, wn, e0, len(x.Extra))
			t.npp++
		}
		fmt.Fprintf(&pspecs, "\t{%d, %d, %d},\n", i, p0, t.npp-p0)
		nps++
	}

	fmt.Fprintf(b, "static const struct viewspec VIEWS_%d[] = {\n%s\t{0}};\n", k, views.String())
	fmt.Fprintf(b, "static const struct pipespec PIPESPECS_%d[] = {\n%s\t{0}};\n", k, pspecs.String())
	t.npipes = append(t.npipes, nps)
}

// opExp writes the expectation of one operation: what its result may be
// and which parts of it the reproducer checks.
func (t *tables) opExp(op prog.Op, o checker.OpSpec, e obs.OpResult) {
	certainOK := len(o.Errnos) == 1 && o.Errnos[0] == 0
	loose := 0
	if len(o.Errnos) == 0 || op.Thread > 0 {
		loose = 1
		if resultSensitive(op) {
			loose = 2
		}
	}
	chkSkipped := 0
	if (op.Kind == prog.OpStore || op.Kind == prog.OpProcMem || op.Kind == prog.OpPVWrite) && op.Thread == 0 && certainOK && o.SkippedJudged {
		chkSkipped = 1
	}
	chkRet := "RET_NONE"
	switch op.Kind {
	case prog.OpWait:
		if certainOK {
			chkRet = "RET_EXIT0"
			if e.Ret == 9 {
				chkRet = "RET_KILLED"
			}
		}
	case prog.OpMremap:
		if e.Errno == 0 {
			chkRet = "RET_MREMAP"
		}
	case prog.OpProcMem, prog.OpPVWrite:
		if chkSkipped == 1 || (op.Thread > 0 && e.Errno == 0) {
			chkRet = "RET_EXACT"
		}
	case prog.OpMmap, prog.OpODirect, prog.OpVmsplice, prog.OpReadPipe, prog.OpUringRead, prog.OpPMadvise:
		if certainOK || (op.Thread > 0 && e.Errno == 0) {
			chkRet = "RET_EXACT"
		}
	}
	var errs []string
	for _, x := range o.Errnos {
		errs = append(errs, fmt.Sprint(x))
	}
	if len(errs) == 0 {
		errs = []string{"0"}
	}
	fmt.Fprintf(&t.sets, "\t{%d, %d, %d, {%s}, %d, %#x, %d, %d, %s, %s},\n", b2i(o.Judged), loose, len(o.Errnos), strings.Join(errs, ", "),
		e.Errno, e.Ret, e.Skipped, chkSkipped, chkRet, cstr(o.Why))
}

// addAlt adds one alternative content of a page: its words.
func (t *tables) addAlt(ws []checker.WordVal) {
	fmt.Fprintf(&t.alts, "{%d,%d},", t.nw, len(ws))
	t.na++
	for _, x := range ws {
		fmt.Fprintf(&t.words, "{%d,%#x},", x.K, x.V)
		t.nw++
	}
	if t.na%8 == 0 {
		t.alts.WriteByte('\n')
	}
}

// addWild adds the words of a page that may hold anything; it returns
// the first and how many.
func (t *tables) addWild(ws []uint16) (int, int) {
	first := t.nwild
	for _, x := range ws {
		fmt.Fprintf(&t.wild, "%d,", x)
		t.nwild++
	}
	return first, len(ws)
}

// view adds view v's segments and pages, and its line to views.
func (t *tables) view(views *bytes.Buffer, v checker.ViewSpec) {
	seg0, page0 := t.nseg, t.npage
	for _, sg := range v.Segs {
		prot := sg.Prot
		if prot == "" {
			prot = "????"
		}
		st := 1
		if sg.State == obs.NoAccess {
			st = 2
		}
		fmt.Fprintf(&t.segs, "\t{%d, %d, %d, %d, %d, %d, %s, %d, %d},\n", sg.Region, sg.First, sg.N, b2i(sg.Unknown), sg.Readable, st, cstr(prot), sg.FileOffset, b2i(sg.ContentUnknown))
		t.nseg++
	}
	for _, ps := range v.Pages {
		a0 := t.na
		for _, a := range ps.Alts {
			t.addAlt(a)
		}
		w0, wn := t.addWild(ps.Wild)
		fmt.Fprintf(&t.pages, "\t{%d, %d, %d, %d, %d, %d, %d},\n", ps.Region, ps.Page, b2i(ps.Unknown), a0, len(ps.Alts), w0, wn)
		t.npage++
	}
	fmt.Fprintf(views, "\t{%d, %d, %d, %d, %d, %d},\n", v.Proc, v.At, seg0, t.nseg-seg0, page0, t.npage-page0)
}
