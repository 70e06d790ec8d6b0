package vm

import (
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/internal/ksyms"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// kcovProg forks, and the child writes (COW faults) before it looks.
const kcovProg = `forkfuzz v1
region r0 anon-private pages=64 thp=off
store r0 off=0x0 count=64 stride=0x1000
fork f0
f0: store r0 off=0x0 count=64 stride=0x1000
f0: check
wait f0
`

// TestQEMUKcov runs a program on the reference kernel (CONFIG_KCOV) and
// checks the coverage the executor collects: the parent's fork (dup_mmap,
// copy_page_range) and copy-on-write faults (wp_page_copy, do_wp_page).
func TestQEMUKcov(t *testing.T) {
	needQEMU(t)
	image := referenceKernel(t)
	cfg, _, err := kernel.FindConfig(image)
	if err == nil && !cfg.On("CONFIG_KCOV") {
		t.Skipf("%s lacks CONFIG_KCOV", image)
	}
	tg := bootTarget(t, image, nil, time.Minute, nil)
	p := mustParse(t, kcovProg)
	o, err := tg.Run(p, agents.Options{Symbols: true})
	if err != nil {
		t.Fatal(err)
	}
	c := o.Cover
	if c == nil || c.Unavailable != "" {
		t.Fatalf("no coverage on a KCOV kernel: %+v", c)
	}
	if c.Procs != 2 || len(c.PCs) < 1000 || len(c.Edges) < len(c.PCs)/2 {
		t.Fatalf("coverage: %d procs, %d PCs, %d edges; want 2 procs and over 1000 PCs", c.Procs, len(c.PCs), len(c.Edges))
	}
	syms := c.Symbols
	in := func(fn string) int {
		lo, hi := symRange(t, syms, fn)
		i := sort.Search(len(c.PCs), func(i int) bool { return c.PCs[i] >= lo })
		n := 0
		for ; i < len(c.PCs) && c.PCs[i] < hi; i++ {
			n++
		}
		return n
	}
	for _, fn := range []string{"dup_mmap", "copy_page_range", "wp_page_copy", "do_wp_page"} {
		if n := in(fn); n == 0 {
			t.Errorf("no PC in %s", fn)
		} else {
			t.Logf("%s: %d PCs", fn, n)
		}
	}
	t.Logf("%d PCs, %d edges, overflow %v %s", len(c.PCs), len(c.Edges), c.Overflow, c.Note)
	// What the executor reads around a fork (the page census: pagemap,
	// and smaps where a region has THP; the evidence) is the harness's,
	// not the program's: before it was dropped it filled the main buffer
	// at 256 of 310 corpus forks of a 30-minute campaign.
	harness := func(what string) {
		t.Helper()
		for _, fn := range []string{"pagemap_read", "show_smap", "kpageflags_read"} {
			if n := in(fn); n != 0 {
				t.Errorf("%s: %d PCs in %s: the executor's own reads around the fork were counted", what, n, fn)
			}
		}
		if c.Overflow {
			t.Errorf("%s: coverage overflowed: %s", what, c.Note)
		}
	}
	harness("a fork of 64 pages")
	// The fork's PCs are drained by the drainer goroutine (the main
	// buffer is swapped after each fork: executor/kcov_async.go); the
	// same program drained on the main thread covers the same fork code.
	syncRun, err := tg.Run(p, agents.Options{SyncKcovDrain: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"dup_mmap", "copy_page_range"} {
		n := in(fn)
		c = syncRun.Cover
		ns := in(fn)
		c = o.Cover
		if ns == 0 || n == 0 {
			t.Errorf("%s: %d PCs drained asynchronously, %d synchronously; want both above 0", fn, n, ns)
		}
		t.Logf("%s: %d PCs (async drain), %d (sync)", fn, n, ns)
	}
	thp, err := tg.Run(mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1024 thp=on\nstore r0 off=0x0 count=1024 stride=0x1000\n"+
		"fork f0\nf0: store r0 off=0x8 count=4 stride=0x1000\nwait f0\nfork f1\nwait f1\n"), agents.Options{ChildKcovGrow: executor.GrowAll})
	if err != nil {
		t.Fatal(err)
	}
	c = thp.Cover
	if n := in("dup_mmap"); n == 0 || c.Procs != 3 {
		t.Errorf("THP program: %d PCs in dup_mmap, %d processes covered; want some in 3", n, c.Procs)
	}
	harness("two forks of 4 MiB of THP")
	if len(thp.ForkPages) == 0 || thp.ForkPages[0].THP == 0 {
		t.Logf("THP program: the census saw no THP (%+v): smaps was not read", thp.ForkPages)
	}
	// Without the fork: no dup_mmap. (wp_page_copy would not do: the
	// executor's Go runtime writes its own memory after a fork.)
	q := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=64 thp=off\nstore r0 off=0x0 count=64 stride=0x1000\ncheck\n")
	o2, err := tg.Run(q, agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o2.Cover.Symbols != "" {
		t.Errorf("symbols sent without being asked for")
	}
	c = o2.Cover
	if n := in("dup_mmap"); n != 0 || c.Procs != 1 {
		t.Errorf("%d PCs in dup_mmap, %d processes covered, in a program without a fork", n, c.Procs)
	}
	if n := in("do_mprotect_pkey"); n != 0 {
		t.Errorf("%d PCs in do_mprotect_pkey in a program without mprotect: the thread test below proves nothing", n)
	}
	// Threads collect on descriptors of their own: t1's mprotect and
	// its stores racing the fork are the program's coverage too.
	thr, err := tg.Run(mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=64 thp=off\nstore r0 off=0x0 count=64 stride=0x1000\n"+
		"t1: mprotect r0 off=0x0 len=0x40000 prot=r\nt1: mprotect r0 off=0x0 len=0x40000 prot=rw\njoin t1\n"+
		"t1: storeloop r0 off=0x0 count=64 stride=0x1000 until=f0\nfork f0\nf0: check\nwait f0\njoin t1\n"), agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c = thr.Cover
	if c == nil || c.Threads != 1 || c.Procs != 2 || c.Overflow {
		t.Errorf("a thread's mprotect and storeloop: coverage %d procs, %d threads, overflow %v (%s)", c.Procs, c.Threads, c.Overflow, c.Note)
	} else if n := in("do_mprotect_pkey"); n == 0 {
		t.Errorf("no PC in do_mprotect_pkey: thread t1's coverage is missing (%d PCs, %d edges)", len(c.PCs), len(c.Edges))
	} else {
		t.Logf("a thread's mprotect and storeloop: %d PCs in do_mprotect_pkey, %d PCs in all", n, len(c.PCs))
	}
	b, err := os.ReadFile("testdata/kcov-thread-log.ffz")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := tg.Run(mustParse(t, string(b)), agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// (Its child's fork, op 6, fills the child's buffer: GrowNone.)
	if c := tl.Cover; c == nil || c.Threads != 1 || strings.Contains(c.Note, "thread 1:") {
		t.Errorf("a storeloop whose log grows: coverage %d threads, overflow %v (%s)", c.Threads, c.Overflow, c.Note)
	}
	o3, err := tg.Run(p, agents.Options{NoCover: true})
	if err != nil {
		t.Fatal(err)
	}
	if o3.Cover == nil || o3.Cover.Unavailable == "" || len(o3.Cover.PCs) != 0 {
		t.Errorf("NoCover: %+v", o3.Cover)
	}
	// A child that breaks COW on 2048 pages records some 600K PCs, ten
	// times its buffer: the store loop drains as it goes, so nothing is
	// lost (82 of 84 corpus programs of a 10-minute campaign had lost
	// some before).
	big := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=2048 thp=off\nstore r0 off=0x0 count=2048 stride=0x1000\n"+
		"fork f0\nf0: store r0 off=0x8 count=2048 stride=0x1000\nwait f0\n")
	o4, err := tg.Run(big, agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := o4.Cover; c == nil || c.Procs != 2 || c.Overflow {
		t.Errorf("2048 COW faults in a child: coverage %d procs, overflow %v (%s)", c.Procs, c.Overflow, c.Note)
	} else {
		t.Logf("2048 COW faults in a child: %d PCs, %d edges, no overflow", len(c.PCs), len(c.Edges))
	}
	// A child that forks copies the page tables of the whole executor
	// it inherited, and one that unmaps 4 MiB of THP does it in one
	// call: both fill a child's 64K-PC buffer. With GrowAll the child
	// grows its buffer before such an operation and nothing is lost; by
	// default (GrowNone) it keeps the first 64K PCs and the note names
	// the operation.
	nested := mustParse(t, "forkfuzz v1\nregion r0 anon-private pages=1024 thp=on\nstore r0 off=0x0 count=1024 stride=0x1000\n"+
		"fork f0\nf0: fork f1\nf1: check\nf0: wait f1\nf0: munmap r0 off=0x0 len=0x400000\nwait f0\n")
	o5, err := tg.Run(nested, agents.Options{ChildKcovGrow: executor.GrowAll})
	if err != nil {
		t.Fatal(err)
	}
	if c := o5.Cover; c == nil || c.Procs != 3 || c.Overflow {
		t.Errorf("a child's fork and munmap of 4 MiB, buffers grown: coverage %d procs, overflow %v (%s)", c.Procs, c.Overflow, c.Note)
	} else {
		t.Logf("a child's fork and munmap of 4 MiB, buffers grown: %d PCs, %d edges, no overflow", len(c.PCs), len(c.Edges))
	}
	o6, err := tg.Run(nested, agents.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := o6.Cover; c == nil || c.Procs != 3 || !c.Overflow || !strings.Contains(c.Note, "process 1: the kcov buffer filled during op 2") {
		t.Errorf("a child's fork and munmap of 4 MiB, default buffers: coverage %d procs, overflow %v (%s); want the child's fork (op 2) noted", c.Procs, c.Overflow, c.Note)
	} else {
		t.Logf("a child's fork and munmap of 4 MiB, default buffers: %d PCs, %d edges against %d grown (%s)", len(c.PCs), len(c.Edges), len(o5.Cover.Edges), c.Note)
	}
}

// symRange returns the address range of fn in kallsyms text (up to the
// next symbol; internal/ksyms).
func symRange(t *testing.T, syms, fn string) (uint64, uint64) {
	t.Helper()
	s, err := ksyms.Parse("kallsyms", strings.NewReader(syms))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, ok := s.Range(fn)
	if !ok {
		t.Fatalf("%s not in kallsyms", fn)
	}
	return lo, hi
}

// BenchmarkQEMUKcov measures what collecting coverage costs per program
// on the reference kernel: the same generated programs with and without.
//
//	FORKFUZZ_TEST_KERNEL=.../bzImage-6.1.192-forkfuzz go test -run XXX -bench QEMUKcov -benchtime 8x ./agents/vm
func BenchmarkQEMUKcov(b *testing.B) {
	image := os.Getenv("FORKFUZZ_TEST_KERNEL")
	if image == "" {
		b.Skip("set FORKFUZZ_TEST_KERNEL to a KCOV kernel")
	}
	agent := staticAgent(b)
	tg, err := New(Config{Kernel: image, Agent: agent, Accel: "auto", Workdir: b.TempDir(),
		HangTimeout: 3 * time.Minute, ProgramTimeout: 3 * time.Minute, BootTimeout: 3 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer tg.Close()
	w, _ := gen.Profile("default")
	for _, mode := range []struct {
		name string
		off  bool
	}{{"cover", false}, {"nocover", true}} {
		b.Run(mode.name, func(b *testing.B) {
			pcs := 0
			for i := 0; i < b.N; i++ {
				p := gen.Generate(rand.New(rand.NewPCG(uint64(i), 1)), w)
				o, err := tg.Run(p, agents.Options{NoCover: mode.off})
				if err != nil {
					b.Fatal(err)
				}
				if o.Cover != nil {
					pcs += len(o.Cover.PCs)
				}
			}
			b.ReportMetric(float64(pcs)/float64(b.N), "pcs/program")
		})
	}
}
