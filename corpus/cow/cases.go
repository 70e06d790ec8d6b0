// Package cow is the kernel's COW selftest (tools/testing/selftests/mm/cow.c,
// Linux 6.12) as a table: every case cow.c runs on x86-64 (a test body
// times a page kind), and for each either the forkfuzz program that
// expresses it or why forkfuzz cannot express it yet.
//
// `go generate ./corpus/cow` (mkcow) writes the expressible cases as
// program files beside this file (corpus/cow/*.ffz, embedded by package
// corpus and replayed by the CI gate) and the matrix into docs/cow.md;
// TestGenerated fails when the checked-in files differ from the table.
//
// How cow.c's steps become forkfuzz operations: cow.c's "modify" (a memset
// of the whole range) is a store of one slot every 0x200 bytes; its
// child, which compares the range with a copy taken before the parent
// wrote, is a child whose start view (taken at "wait", after the parent's
// writes) the snapshot oracle compares with the memory at fork; a
// vmsplice'd pipe read back is readpipe, judged by the pipe oracle (a
// foreign private write must never show); a long-term R/W pin is
// uringreg, and cow.c's io_uring WRITE_FIXED (the pin must see the
// process's write) is turned around into uringread (the process must see
// what the kernel wrote through the pin), since forkfuzz has no
// WRITE_FIXED. Where a size exceeds what one forkfuzz operation may cover
// (16 pages per vmsplice, the capacity of a default pipe, which also
// bounds what cow.c's vmsplice transfers; 256 pages per uringreg), the
// operation covers the start of the range; uringread (16 pages at most)
// writes the start and the end of the registered part.
//
//go:generate go run ./mkcow
package cow

import (
	"fmt"
	"strings"

	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// Group is which of cow.c's three case tables a body belongs to.
type Group int

const (
	Anon    Group = iota // anon_test_cases: every anonymous page kind
	AnonTHP              // anon_thp_test_cases: PMD-mapped THP only
	NonAnon              // non_anon_test_cases: zeropages and page cache
)

// Body is one of cow.c's test functions.
type Body struct {
	Name  string // short name, used in file names
	Desc  string // cow.c's description, as in its "[RUN] ..." line
	Group Group
	// Missing says why forkfuzz cannot express the body ("" if it can).
	Missing string
	// Vmsplice: the body splices the range into a pipe.
	Vmsplice bool
	// emit writes the body's operations on the range m.
	emit func(b *builder, m rng)
}

// Kind is one of cow.c's page kinds (the run_with_* functions).
type Kind struct {
	Name  string // short name, used in file names
	Desc  string // cow.c's "... with <Desc>"
	Group Group
	// Missing says why forkfuzz cannot express the kind ("" if it can);
	// VmspliceMissing why the vmsplice bodies have no program on it.
	Missing, VmspliceMissing string
	// setup declares the regions, populates them and returns the range
	// the body works on.
	setup func(b *builder) rng
}

// Case is one cow.c case: a body with a kind.
type Case struct {
	Body *Body
	Kind *Kind
	// Run is the text cow.c prints before the case ("[RUN] ..." without
	// the prefix), which names the case in its output.
	Run string
	// File is the program's file name (empty when Missing is set).
	File string
	// Text is the program file (comment header and program).
	Text []byte
	// Missing says why the case has no program.
	Missing string
}

// rng is a byte range of a region: cow.c's (mem, size).
type rng struct {
	r         int
	off, size uint64
	// after, if set, runs after a non-anonymous body's write (the memfd
	// kind's second pwrite).
	after func(b *builder)
}

// builder accumulates a program's lines.
type builder struct {
	lines []string
	forks int
}

func (b *builder) op(format string, args ...any) {
	b.lines = append(b.lines, fmt.Sprintf(format, args...))
}

// fork returns the name of a new fork.
func (b *builder) fork() string {
	f := fmt.Sprintf("f%d", b.forks)
	b.forks++
	return f
}

const (
	thpSize     = prog.PMDSize
	writeStride = 0x200
	// maxSplice is what one vmsplice may cover (and a default pipe holds).
	maxSplice = prog.MaxIOPages * prog.PageSize
	maxUring  = prog.MaxUringPages * prog.PageSize
)

// write is cow.c's memset of the range: one slot every writeStride bytes
// (every page gets written), from process prefix pfx ("" or "fN: ").
func (b *builder) write(pfx string, m rng) {
	stride := uint64(writeStride)
	if m.size < stride {
		stride = prog.SlotSize
	}
	b.op("%sstore r%d off=%#x count=%d stride=%#x", pfx, m.r, m.off, m.size/stride, stride)
}

// protectRW is cow.c's mprotect(PROT_READ) and back to PROT_READ|PROT_WRITE.
func (b *builder) protectRW(m rng) {
	b.op("mprotect r%d off=%#x len=%#x prot=r", m.r, m.off, m.size)
	b.op("mprotect r%d off=%#x len=%#x prot=rw", m.r, m.off, m.size)
}

func spliceLen(m rng) uint64 { return min(m.size, maxSplice) }

// Parse builds the case's program; errors name the file and line
// (corpus.FileError). It is an error for a case with Missing set.
func (c *Case) Parse() (*prog.Program, error) {
	if c.Missing != "" {
		return nil, fmt.Errorf("cow: %s: not expressible: %s", c.Run, c.Missing)
	}
	p, err := corpus.ParseFile("corpus/cow/"+c.File, c.Text)
	if err != nil {
		return nil, fmt.Errorf("cow: %w (cow.c's %s)", err, c.Run)
	}
	return p, nil
}

// Cases returns every case cow.c runs on x86-64 with one THP size (PMD,
// as on Linux 6.1, which has no multi-size THP) and two hugetlb sizes
// (2 MiB, 1 GiB), in cow.c's order: 190 cases.
func Cases() []Case {
	var out []Case
	for _, g := range []Group{Anon, AnonTHP, NonAnon} {
		for i := range Bodies {
			bd := &Bodies[i]
			if bd.Group != g {
				continue
			}
			for j := range Kinds {
				k := &Kinds[j]
				if k.Group == g {
					out = append(out, newCase(bd, k))
				}
			}
		}
	}
	return out
}

func newCase(bd *Body, k *Kind) Case {
	c := Case{Body: bd, Kind: k, Run: bd.Desc}
	if k.Desc != "" {
		c.Run += " ... with " + k.Desc
	}
	switch {
	case bd.Missing != "":
		c.Missing = bd.Missing
		return c
	case k.Missing != "":
		c.Missing = k.Missing
		return c
	case bd.Vmsplice && k.VmspliceMissing != "":
		c.Missing = k.VmspliceMissing
		return c
	}
	b := &builder{}
	m := k.setup(b)
	bd.emit(b, m)
	c.File = bd.Name + "--" + k.Name + ".ffz"
	var t strings.Builder
	fmt.Fprintf(&t, "# cow.c (Linux 6.12 tools/testing/selftests/mm): [RUN] %s\n", c.Run)
	t.WriteString("# Generated by go generate ./corpus/cow (corpus/cow/cases.go); do not edit.\n")
	t.WriteString("forkfuzz v1\n")
	for _, l := range b.lines {
		t.WriteString(l + "\n")
	}
	c.Text = []byte(t.String())
	return c
}
