package kernel

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Go table (names, numbers, the file each bug is in) is the patch's.
func TestMutantsMatchPatch(t *testing.T) {
	got, err := PatchMutants(MutantsPatch)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(Mutants) {
		t.Fatalf("patch has %d mutants, the Go table %d", len(got), len(Mutants))
	}
	if len(Mutants) < 12 {
		t.Errorf("%d mutants: the benchmark plants at least 12", len(Mutants))
	}
	files := map[string]bool{}
	for _, l := range strings.Split(MutantsPatch, "\n") {
		if f, ok := strings.CutPrefix(l, "+++ b/"); ok {
			files[strings.Fields(f)[0]] = true
		}
	}
	for i, m := range Mutants {
		if m.Num != i+1 || got[i].Num != m.Num || got[i].Name != m.Name {
			t.Errorf("mutant %d: Go %d %q, patch %d %q", i, m.Num, m.Name, got[i].Num, got[i].Name)
		}
		if !files[m.File] {
			t.Errorf("mutant %s: the patch does not touch %s", m.Name, m.File)
		}
		if !strings.Contains(MutantsPatch, m.Func) {
			t.Errorf("mutant %s: the patch never names %s", m.Name, m.Func)
		}
		if m.Breaks == "" || m.Oracle == "" || m.Needs == "" {
			t.Errorf("mutant %s: undocumented", m.Name)
		}
		if m.Cmdline() != "forkfuzz_mutant="+m.Name {
			t.Errorf("mutant %s: cmdline %q", m.Name, m.Cmdline())
		}
	}
	// Every mutant's guard is in the patch's code, not only its table.
	for _, l := range []string{"FFM_WP_SRC_MEMFD", "FFM_FAIL_MM_LEAK", "FFM_KEEPONFORK_IGNORED"} {
		if strings.Count(MutantsPatch, "ffm("+l+")") == 0 {
			t.Errorf("no ffm(%s) guard in the patch", l)
		}
	}
}

func TestMutantByName(t *testing.T) {
	for _, s := range []string{"wp-src-pmd", "3"} {
		m, err := MutantByName(s)
		if err != nil || m.Name != "wp-src-pmd" {
			t.Errorf("MutantByName(%q) = %v, %v", s, m.Name, err)
		}
	}
	for _, s := range []string{"", "0", "nope", "99"} {
		if _, err := MutantByName(s); err == nil || !strings.Contains(err.Error(), "unknown mutant") {
			t.Errorf("MutantByName(%q): err %v, want unknown mutant", s, err)
		}
	}
}

func TestPatchMutantsRejectsBadTables(t *testing.T) {
	for _, p := range []string{
		"",
		"+\tFFM_A = 1,\n+\t[FFM_B] = \"b\",\n",
		"+\tFFM_A = 2,\n+\t[FFM_A] = \"a\",\n",
	} {
		if _, err := PatchMutants(p); err == nil {
			t.Errorf("PatchMutants(%q): no error", p)
		}
	}
}

// mutantsSource finds an unpacked linux-source-6.1 6.1.192 tree:
// $FORKFUZZ_LINUX_SRC, else the cache's plain or mutants tree.
func mutantsSource(t *testing.T) string {
	var cands []string
	if d := os.Getenv("FORKFUZZ_LINUX_SRC"); d != "" {
		cands = append(cands, d)
	}
	cands = append(cands, filepath.Join(CacheDir(), "src", DefaultSourcePackage), mutantsTree(CacheDir()))
	for _, d := range cands {
		mk, err := os.ReadFile(filepath.Join(d, "Makefile"))
		if err != nil {
			continue
		}
		if !strings.Contains(string(mk), "\nVERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 192\n") {
			t.Logf("%s is not Linux 6.1.192", d)
			continue
		}
		return d
	}
	t.Skipf("no Linux 6.1.192 source at hand (set FORKFUZZ_LINUX_SRC, or run forkfuzz kernel build once; looked in %s)", strings.Join(cands, ", "))
	return ""
}

// The patch applies to Debian's linux-source-6.1 6.1.192-3 (checked on a
// copy of the files it touches, so the tree is never changed).
func TestMutantsPatchApplies(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	src := mutantsSource(t)
	tmp := copyPatched(t, src)
	err := ApplyMutants(tmp, nil)
	if errors.Is(err, ErrMutantsApplied) {
		t.Logf("%s already has the mutants patch (a --mutants tree): it reverses cleanly", src)
		return
	}
	_, stamped := os.Stat(filepath.Join(src, MutantsStamp))
	if _, h := os.Stat(filepath.Join(src, "include/linux/forkfuzz_mutant.h")); err != nil && h == nil && stamped != nil {
		t.Skipf("%s is a --mutants tree patched by another version of the patch, from before stamps: nothing to check against (%v)", src, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyMutants(tmp, nil); !errors.Is(err, ErrMutantsApplied) {
		t.Errorf("second ApplyMutants: %v, want ErrMutantsApplied", err)
	}
	h, err := os.ReadFile(filepath.Join(tmp, "include/linux/forkfuzz_mutant.h"))
	if err != nil || !strings.Contains(string(h), "FFM_NR") {
		t.Errorf("include/linux/forkfuzz_mutant.h after patching: %v", err)
	}
}

// copyPatched copies the files the mutants patch touches or creates (and
// the tree's MutantsStamp, if any) from src into a new directory.
func copyPatched(t *testing.T, src string) string {
	t.Helper()
	tmp := t.TempDir()
	for _, l := range strings.Split(MutantsPatch, "\n") {
		f, ok := strings.CutPrefix(l, "--- a/")
		if !ok {
			f, ok = strings.CutPrefix(l, "+++ b/") // a new file, if src has it
		}
		if !ok {
			continue
		}
		f = strings.Fields(f)[0]
		b, err := os.ReadFile(filepath.Join(src, f))
		if errors.Is(err, os.ErrNotExist) {
			continue // a new file
		}
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(tmp, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(src, MutantsStamp)); err == nil {
		if err := os.WriteFile(filepath.Join(tmp, MutantsStamp), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// A tree patched by an earlier version of the mutants patch (its stamp
// says which) gets that version reversed and the current one applied,
// instead of failing to apply (the tree the cache keeps for --mutants
// builds outlives patch changes).
func TestApplyMutantsReplacesEarlierVersion(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	tmp := copyPatched(t, mutantsSource(t))
	os.Remove(filepath.Join(tmp, MutantsStamp))
	if reverseDiff(tmp, []byte(MutantsPatch)) == nil {
		t.Logf("the source is a --mutants tree: its copy was reversed to the pristine files")
	}
	first := Mutants[0].Name
	earlier := strings.Replace(MutantsPatch, `"`+first+`",`, `"`+first+`-earlier",`, 1)
	if earlier == MutantsPatch {
		t.Fatalf("the patch has no name entry %q to change", first)
	}
	if err := applyDiff(tmp, []byte(earlier), "the earlier patch", "", nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, MutantsStamp), []byte(earlier), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if err := ApplyMutants(tmp, &log); err != nil {
		t.Fatalf("ApplyMutants over the earlier version: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "earlier version") {
		t.Errorf("the log does not say the earlier version was reversed:\n%s", log.String())
	}
	h, err := os.ReadFile(filepath.Join(tmp, "mm/memory.c"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(h), first+"-earlier") || !strings.Contains(string(h), `"`+first+`"`) {
		t.Errorf("after ApplyMutants the name table is not the current patch's")
	}
	if b, _ := os.ReadFile(filepath.Join(tmp, MutantsStamp)); string(b) != MutantsPatch {
		t.Errorf("the stamp is not the current patch")
	}
	if err := ApplyMutants(tmp, nil); !errors.Is(err, ErrMutantsApplied) {
		t.Errorf("ApplyMutants again: %v, want ErrMutantsApplied", err)
	}
}

// A tree the patch does not fit is a clear error, not a half-patched tree.
func TestApplyMutantsWrongTree(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, "mm"), 0o755)
	os.WriteFile(filepath.Join(tmp, "mm", "memory.c"), []byte("int x;\n"), 0o644)
	err := ApplyMutants(tmp, nil)
	if err == nil || !strings.Contains(err.Error(), "does not apply") {
		t.Fatalf("ApplyMutants on a wrong tree: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(tmp, "mm", "memory.c"))
	if string(b) != "int x;\n" {
		t.Errorf("the wrong tree was changed: %q", b)
	}
}

// preImages builds, from the patch alone, files holding what each hunk
// expects to find (its context and removed lines, hunk after hunk): a tree
// the patch applies to, with offsets, without the kernel source.
func preImages(patch string) map[string]string {
	files := map[string]string{}
	cur := ""
	inHunk := false
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "--- a/"):
			cur, inHunk = strings.Fields(strings.TrimPrefix(l, "--- a/"))[0], false
		case strings.HasPrefix(l, "+++ "):
		case strings.HasPrefix(l, "@@"):
			inHunk = true
			files[cur] += "/* between hunks */\n"
		case inHunk && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "-")):
			files[cur] += l[1:] + "\n"
		case inHunk && l == "":
			files[cur] += "\n"
		}
	}
	delete(files, "include/linux/forkfuzz_mutant.h") // created by the patch
	return files
}

// Build with Mutants patches the tree (once), names the image and the
// build directory apart, and merges mutants.config.
func TestBuildMutantsFakeTree(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	src := fakeTree(t)
	for f, text := range preImages(MutantsPatch) {
		os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(src, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	res, err := Build(BuildOptions{Src: src, Jobs: 2, Mutants: true, Log: &log, skipToolCheck: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if want := filepath.Join(src, "forkfuzz-build-mutants", "bzImage-forkfuzz-mutants"); res.Image != want {
		t.Errorf("image %s, want %s", res.Image, want)
	}
	if b, _ := os.ReadFile(res.Image); string(b) != "image\n" {
		t.Errorf("image content %q", b)
	}
	if !strings.Contains(log.String(), "applying the mutants patch") {
		t.Errorf("log does not say it patched:\n%s", log.String())
	}
	if h, err := os.ReadFile(filepath.Join(src, "include/linux/forkfuzz_mutant.h")); err != nil || !strings.Contains(string(h), "FFM_GUP_WRITE_SHARED") {
		t.Errorf("the tree has no forkfuzz_mutant.h: %v", err)
	}
	frag, _ := os.ReadFile(filepath.Join(src, "forkfuzz-build-mutants", "forkfuzz.config"))
	if !strings.Contains(string(frag), "# CONFIG_IPV6 is not set") || !strings.Contains(string(frag), "CONFIG_KCOV=y") {
		t.Errorf("the merged fragment lacks mutants.config or forkfuzz.config:\n%s", frag)
	}
	log.Reset()
	if _, err := Build(BuildOptions{Src: src, Jobs: 2, Mutants: true, Log: &log, skipToolCheck: true}); err != nil {
		t.Fatalf("second build: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "already has the mutants patch") {
		t.Errorf("second build did not notice the patch was in:\n%s", log.String())
	}
	// A tree the patch does not fit stops the build before make.
	bad := fakeTree(t)
	os.MkdirAll(filepath.Join(bad, "mm"), 0o755)
	os.WriteFile(filepath.Join(bad, "mm", "memory.c"), []byte("int x;\n"), 0o644)
	if _, err := Build(BuildOptions{Src: bad, Mutants: true, skipToolCheck: true}); err == nil || !strings.Contains(err.Error(), "does not apply") {
		t.Errorf("build of a tree the patch does not fit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bad, "forkfuzz-build-mutants")); err == nil {
		t.Error("the failed build ran make")
	}
}
