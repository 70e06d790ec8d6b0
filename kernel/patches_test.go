package kernel

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A two-patch series for the fake tree: the first adds a Kconfig option to
// the Makefile's olddefconfig, the second changes a file the first added.
const (
	fakePatch1 = `--- a/drivers/fix.c
+++ b/drivers/fix.c
@@ -0,0 +1,2 @@
+int fix(void)
+{ return 1; }
`
	fakePatch2 = `--- a/drivers/fix.c
+++ b/drivers/fix.c
@@ -1,2 +1,2 @@
 int fix(void)
-{ return 1; }
+{ return 2; }
`
)

func writePatchFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadPatchesErrors(t *testing.T) {
	dir := t.TempDir()
	good := writePatchFile(t, dir, "good.patch", fakePatch1)
	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"missing", []string{filepath.Join(dir, "nope.patch")}, "--patch " + filepath.Join(dir, "nope.patch")},
		{"not a diff", []string{writePatchFile(t, dir, "notes.txt", "hello\n--- only minus\nno plus\n")}, "not a unified diff"},
		{"empty", []string{writePatchFile(t, dir, "empty.patch", "")}, "not a unified diff"},
		{"directory", []string{dir}, "--patch " + dir},
		{"second bad", []string{good, filepath.Join(dir, "gone.patch")}, "gone.patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPatches(tc.paths)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadPatches(%v) = %v, want an error with %q", tc.paths, err, tc.want)
			}
		})
	}
	ps, err := ReadPatches([]string{good})
	if err != nil || len(ps) != 1 || ps[0].Path != good || string(ps[0].Text) != fakePatch1 {
		t.Fatalf("ReadPatches(good) = %+v, %v", ps, err)
	}
}

func TestPatchesID(t *testing.T) {
	a := []Patch{{Text: []byte(fakePatch1)}, {Text: []byte(fakePatch2)}}
	b := []Patch{{Text: []byte(fakePatch2)}, {Text: []byte(fakePatch1)}}
	c := []Patch{{Text: []byte(fakePatch1 + fakePatch2)}}
	if patchesID(a) == patchesID(b) || patchesID(a) == patchesID(c) {
		t.Errorf("patch series of other order or split share an id: %s %s %s", patchesID(a), patchesID(b), patchesID(c))
	}
	if patchesID(a) != patchesID([]Patch{{Path: "x", Text: []byte(fakePatch1)}, {Text: []byte(fakePatch2)}}) {
		t.Error("the id depends on the paths, not only the texts")
	}
	if !strings.HasPrefix(filepath.Base(patchedTree("/c", a)), DefaultSourcePackage+"-p") {
		t.Errorf("patchedTree = %s", patchedTree("/c", a))
	}
}

// A series is applied in order, a second build skips what is there, and a
// patch that does not apply is an error naming it.
func TestBuildPatchesFakeTree(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	src := fakeTree(t)
	os.MkdirAll(filepath.Join(src, "drivers"), 0o755)
	dir := t.TempDir()
	p1 := writePatchFile(t, dir, "0001.patch", fakePatch1)
	p2 := writePatchFile(t, dir, "0002.patch", fakePatch2)
	var log bytes.Buffer
	if _, err := Build(BuildOptions{Src: src, Jobs: 2, Patches: []string{p1, p2}, Log: &log, skipToolCheck: true}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(src, "drivers/fix.c")); string(b) != "int fix(void)\n{ return 2; }\n" {
		t.Fatalf("drivers/fix.c after the series: %q", b)
	}
	if !strings.Contains(log.String(), "applying "+p1) || !strings.Contains(log.String(), "applying "+p2) {
		t.Errorf("the log does not say what it applied:\n%s", log.String())
	}
	log.Reset()
	if _, err := Build(BuildOptions{Src: src, Jobs: 2, Patches: []string{p2}, Log: &log, skipToolCheck: true}); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "already has "+p2) {
		t.Errorf("a second build does not say the patch is there:\n%s", log.String())
	}
	bad := writePatchFile(t, dir, "bad.patch", strings.NewReplacer("return 1", "return 9", "return 2", "return 8").Replace(fakePatch2))
	_, err := Build(BuildOptions{Src: src, Patches: []string{bad}, skipToolCheck: true})
	if err == nil || !strings.Contains(err.Error(), "--patch "+bad+" does not apply") {
		t.Fatalf("a patch that does not apply: %v", err)
	}
	if err := ApplyPatch(src, Patch{Path: p2, Text: []byte(fakePatch2)}, nil); !errors.Is(err, ErrPatchApplied) {
		t.Errorf("ApplyPatch of an applied patch = %v, want ErrPatchApplied", err)
	}
}

// --config starts from the given file (no defconfig), keeps what the tree
// knows and says what it dropped.
func TestBuildConfigFakeTree(t *testing.T) {
	src := fakeTree(t)
	dir := t.TempDir()
	cfgPath := writePatchFile(t, dir, "my.config", "CONFIG_MMU=y\nCONFIG_ASYNC_FORK=y\nCONFIG_KCOV=y\nCONFIG_NOT_IN_THIS_TREE=y\n")
	// The fake olddefconfig drops CONFIG_NOT_IN_THIS_TREE, as a real one
	// drops an option no Kconfig declares (a missing --patch).
	var log bytes.Buffer
	res, err := Build(BuildOptions{Src: src, Jobs: 2, Config: cfgPath, ConfigOnly: true, Log: &log, skipToolCheck: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	cfg, err := ReadConfig(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	if cfg["CONFIG_ASYNC_FORK"] != "y" || cfg["CONFIG_VIRTIO_PCI"] != "" {
		t.Errorf("config = %v: want the given file's options and no defconfig", cfg)
	}
	if strings.Contains(log.String(), "x86_64_defconfig") {
		t.Errorf("--config still ran defconfig:\n%s", log.String())
	}
	if len(res.Dropped) != 1 || res.Dropped[0] != "CONFIG_NOT_IN_THIS_TREE" {
		t.Errorf("Dropped = %v", res.Dropped)
	}
	if !strings.Contains(log.String(), "did not keep CONFIG_NOT_IN_THIS_TREE") {
		t.Errorf("the log does not say what was dropped:\n%s", log.String())
	}
	if len(res.Missing) == 0 || !strings.Contains(log.String(), "lacks") {
		t.Errorf("a config without forkfuzz's fragment: Missing = %v, log:\n%s", res.Missing, log.String())
	}
	if _, err := Build(BuildOptions{Src: src, Config: filepath.Join(dir, "none"), ConfigOnly: true, skipToolCheck: true}); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("a missing --config file: %v", err)
	}
}

func FuzzLooksLikeDiff(f *testing.F) {
	f.Add([]byte(fakePatch1))
	f.Add([]byte("--- a\n"))
	f.Add([]byte("+++ b\n--- a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := looksLikeDiff(b)
		want := bytes.Contains(b, []byte("--- ")) && bytes.Contains(b, []byte("\n+++ "))
		if got && !want {
			t.Fatalf("looksLikeDiff(%q) = true without both headers", b)
		}
	})
}
