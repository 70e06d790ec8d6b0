package kernel

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// MutantsPatch plants forkfuzz's kernel mutation benchmark in Linux 6.1
// (Debian's linux-source-6.1 6.1.192-3): bugs in fork, copy-on-write,
// fork's failure path and GUP, each switched on by the boot parameter
// forkfuzz_mutant=<name or number> (kernel/mutants/README.md).
//
//go:embed mutants/forkfuzz-mutants.patch
var MutantsPatch string

// MutantsConfig is merged after Trim and Fragment by a --mutants build: it
// drops more that a forkfuzz VM never uses, for a faster build and boot.
//
//go:embed mutants/mutants.config
var MutantsConfig string

// MutantsParam is the boot parameter that selects a mutant.
const MutantsParam = "forkfuzz_mutant"

// Mutant is one planted bug of MutantsPatch.
type Mutant struct {
	Num  int
	Name string
	// Where the bug is (file and function of Linux 6.1).
	File, Func string
	// Breaks says what goes wrong.
	Breaks string
	// Oracle is the forkfuzz oracle expected to see it, and Needs what a
	// program must do to reach it.
	Oracle, Needs string
}

// Cmdline is the kernel command-line word that switches m on.
func (m Mutant) Cmdline() string { return MutantsParam + "=" + m.Name }

// Mutants lists the planted bugs in the order of their numbers (1..).
// TestMutantsMatchPatch keeps it equal to the patch's name table.
var Mutants = []Mutant{
	{1, "wp-src-memfd", "mm/memory.c", "copy_present_pte",
		"the parent's PTE is not write-protected for anonymous (COWed) pages of a private shmem/memfd mapping: the parent's later writes show in the child",
		"isolation", "memfd-private region written before fork, written by the parent after it, read by the child"},
	{2, "wp-src-hugepage-pte", "mm/memory.c", "copy_present_pte",
		"the parent's PTE is not write-protected in VMAs advised MADV_HUGEPAGE (PTE-mapped pages of a THP VMA)",
		"isolation", "thp=on region, written before and after fork by the parent, read by the child"},
	{3, "wp-src-pmd", "mm/huge_memory.c", "copy_huge_pmd",
		"the parent's huge PMD is not write-protected: the parent writes into the huge page it shares with the child",
		"isolation", "a THP-backed (2 MiB, thp=on) region written before fork, then by the parent"},
	{4, "rss-thp", "mm/huge_memory.c", "copy_huge_pmd",
		"the child's copied huge PMD is not counted in its MM_ANONPAGES: 'BUG: Bad rss-counter state' when the child's mm goes",
		"kernel (rss-counter)", "a THP-backed region at fork"},
	{5, "nocopy-hugepage", "mm/memory.c", "vma_needs_copy",
		"page tables of anonymous MADV_HUGEPAGE VMAs are not copied at fork ('the child refaults'): the child reads zeros",
		"snapshot", "thp=on anonymous region written before fork, read by the child"},
	{6, "dontfork-ignored", "kernel/fork.c", "dup_mmap",
		"MADV_DONTFORK is ignored for anonymous VMAs: the child has the mapping",
		"mapping / snapshot", "madvise dontfork on an anonymous region, the child touches it"},
	{7, "wipeonfork-copied", "kernel/fork.c", "dup_mmap",
		"MADV_WIPEONFORK memory is copied to the child instead of reading as zeros",
		"snapshot", "madvise wipeonfork on a written region, the child reads it"},
	{8, "wipeonfork-lost", "kernel/fork.c", "dup_mmap",
		"the child's VMA loses VM_WIPEONFORK: the child's own children get its data instead of zeros",
		"snapshot", "wipeonfork region, a nested fork whose grandchild reads it"},
	{9, "mlock-reuse", "mm/memory.c", "do_wp_page",
		"a write fault in an mlocked VMA reuses a page shared with the child (extra references blamed on mlock): the parent writes into the child's page",
		"isolation", "mlock a written region, fork, the parent writes, the child reads"},
	{10, "cow-reuse-mapcount", "mm/memory.c", "do_wp_page",
		"COW reuse decided by mapcount instead of refcount (CVE-2020-29374's shape): a page with a GUP reference (vmsplice) is reused and the pipe sees later writes",
		"pipe / isolation", "vmsplice of a page shared after fork, the other side stops mapping it, the owner writes, the pipe is read"},
	{11, "pinned-shared", "mm/memory.c", "copy_present_pte",
		"a maybe-DMA-pinned page is shared and write-protected at fork instead of copied: the pin and the parent's mapping diverge",
		"memory / isolation", "uringreg (io_uring fixed buffer) on a written region, fork, the parent writes or uringread"},
	{12, "pinned-copy-zero", "mm/memory.c", "copy_present_page",
		"the child's early copy of a maybe-pinned page is never filled: the child reads zeros",
		"snapshot", "uringreg on a written region, fork, the child reads"},
	{13, "gup-write-shared", "mm/gup.c", "can_follow_write_pte",
		"GUP may write a private anonymous page without breaking COW first (Dirty COW's shape): /proc/PID/mem, process_vm_writev and pins write into the page shared with the other process",
		"isolation / kernel (gup VM_BUG_ON)", "procmem, pvwrite or uringreg on a page shared after fork"},
	{14, "fail-mm-leak", "kernel/fork.c", "dup_mm",
		"a fork that fails in dup_mmap never releases the half-built mm: its page tables and page references leak",
		"rollback (pagetables-leak)", "fork fail_nth=K failing inside dup_mmap"},
	{15, "keeponfork-ignored", "mm/madvise.c", "madvise_vma_behavior",
		"MADV_KEEPONFORK does not clear VM_WIPEONFORK: the child reads zeros where the parent's data must be",
		"snapshot", "madvise wipeonfork then keeponfork, written, fork, the child reads"},
	{16, "migration-wp", "mm/memory.c", "copy_nonpresent_pte",
		"a writable migration entry met by fork becomes read-only in the child only: once the page has moved, the parent maps it writable while the child shares it, and the parent's writes show in the child",
		"isolation / kernel (page_table_check)", "a thread moving a written private region between NUMA nodes (migrateloop) while the main thread forks, the parent writes it, the child reads it"},
	{17, "wp-src-hugetlb", "mm/hugetlb.c", "copy_hugetlb_page_range",
		"the parent's huge PTE of a private hugetlb mapping is not write-protected: the parent writes into the huge page it shares with the child",
		"isolation", "a hugetlb-private region written before fork, written by the parent after it, read by the child"},
	{18, "file-private-writable", "mm/memory.c", "copy_present_pte",
		"the child maps a page cache page of a writable private file mapping (memfd, tmpfs, ext4) writable: its writes reach the file and the parent",
		"isolation / file content", "a private file-backed region with one page written (the VMA gets an anon_vma, so fork copies its page tables) and another only read before fork, the child writes the read page, the parent reads it"},
	{19, "swap-dup-skipped", "mm/memory.c", "copy_nonpresent_pte",
		"a swap entry copied at fork does not raise the swap count: when one process frees the slot the other's entry points at a free (later reused) slot",
		"executor-hang / kernel (Unused swap offset entry)", "private anonymous pages swapped out (madvise pageout) before fork, the child exits, the parent touches them (its fault finds the slot free, returns VM_FAULT_OOM and is retried forever) or unmaps them"},
}

// MutantByName finds a mutant by name or number. An unknown one is an
// error naming the valid names.
func MutantByName(s string) (Mutant, error) {
	for _, m := range Mutants {
		if m.Name == s || strconv.Itoa(m.Num) == s {
			return m, nil
		}
	}
	names := make([]string, len(Mutants))
	for i, m := range Mutants {
		names[i] = m.Name
	}
	return Mutant{}, fmt.Errorf("unknown mutant %q (want a number 1-%d or one of %s)", s, len(Mutants), strings.Join(names, ", "))
}

var patchNameRe = regexp.MustCompile(`(?m)^\+\s*\[(FFM_[A-Z_0-9]+)\]\s*=\s*"([^"]+)",`)
var patchEnumRe = regexp.MustCompile(`(?m)^\+\s*(FFM_[A-Z_0-9]+) = (\d+),`)

// PatchMutants reads the mutant table out of a mutants patch: number and
// name of every FFM_* entry but FFM_NONE, in number order.
func PatchMutants(patch string) ([]Mutant, error) {
	nums := map[string]int{}
	for _, m := range patchEnumRe.FindAllStringSubmatch(patch, -1) {
		n, _ := strconv.Atoi(m[2])
		nums[m[1]] = n
	}
	var out []Mutant
	for _, m := range patchNameRe.FindAllStringSubmatch(patch, -1) {
		n, ok := nums[m[1]]
		if !ok {
			return nil, fmt.Errorf("patch: name %q for %s, which the enum does not define", m[2], m[1])
		}
		if n == 0 {
			continue
		}
		if n != len(out)+1 {
			return nil, fmt.Errorf("patch: %s = %d out of order (want %d)", m[1], n, len(out)+1)
		}
		out = append(out, Mutant{Num: n, Name: m[2]})
	}
	if len(out) == 0 {
		return nil, errors.New("patch: no mutant name table")
	}
	return out, nil
}

// ErrMutantsApplied says ApplyMutants found the patch already in the tree.
var ErrMutantsApplied = errors.New("the mutants patch is already applied")

// MutantsStamp is the copy of the mutants patch ApplyMutants leaves in a
// tree it patched, so that a later version of the patch can take the
// earlier one out first.
const MutantsStamp = ".forkfuzz-mutants.patch"

// ApplyMutants applies MutantsPatch to the kernel tree src with patch -p1.
// A tree that already has it is left alone (ErrMutantsApplied); a tree
// patched by an earlier version (its MutantsStamp differs) has that one
// reversed first; a tree it does not apply to is an error that says which
// hunks failed.
func ApplyMutants(src string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	stamp := filepath.Join(src, MutantsStamp)
	if old, err := os.ReadFile(stamp); err == nil && string(old) != MutantsPatch {
		fmt.Fprintf(log, "kernel build: %s carries an earlier version of the mutants patch: reversing it\n", src)
		if err := reverseDiff(src, old); err != nil {
			return fmt.Errorf("%s carries an earlier mutants patch (%s) that does not reverse: %w; remove the tree and build again to unpack a fresh one", src, stamp, err)
		}
		if err := os.Remove(stamp); err != nil {
			return err
		}
	}
	what := "the mutants patch (kernel/mutants/forkfuzz-mutants.patch, for " + DefaultSourcePackage + " 6.1.192-3)"
	say := fmt.Sprintf("applying the mutants patch (%d mutants) to %s", len(Mutants), src)
	err := applyDiff(src, []byte(MutantsPatch), what, say, log)
	if err != nil && !errors.Is(err, ErrPatchApplied) {
		if _, serr := os.Stat(stamp); serr != nil {
			return fmt.Errorf("%w (a tree patched by a version of the mutants patch older than its stamp file %s cannot be told apart: remove the tree, and a --mutants build unpacks a fresh one)", err, MutantsStamp)
		}
		return err
	}
	if werr := os.WriteFile(stamp, []byte(MutantsPatch), 0o644); werr != nil {
		return fmt.Errorf("mutants patch applied to %s, its stamp not written: %w", src, werr)
	}
	if err != nil {
		return ErrMutantsApplied
	}
	return nil
}

// mutantsTree is where a default build with mutants unpacks its own copy of
// the source, so the patch never reaches the tree plain builds use.
func mutantsTree(cache string) string {
	return filepath.Join(cache, "src", DefaultSourcePackage+"-mutants")
}

// copyFile copies src to dst (mode 0644).
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// CachedMutantsImage returns the image a default `forkfuzz kernel build
// --mutants` leaves in the cache, if it is there.
func CachedMutantsImage() (string, bool) {
	p := filepath.Join(mutantsTree(CacheDir()), "forkfuzz-build-mutants", "bzImage-forkfuzz-mutants")
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	return p, true
}
