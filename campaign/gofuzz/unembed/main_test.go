package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies testdata/pkg into a module of its own (main.go.txt
// becomes main.go, so that the module's own build does not see it).
func copyTree(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk("testdata/pkg", func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/pkg", p)
		if rel == "main.go.txt" {
			rel = "main.go"
		}
		out := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "go.mod"), []byte("module example.com/pkg\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func goRun(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run in %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// TestUnembedSameFiles: the rewritten package has no //go:embed left and
// reads exactly the files the embedded one did (text with quotes and
// backquotes, binary, a subdirectory).
func TestUnembedSameFiles(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command: ", err)
	}
	dir := copyTree(t)
	want := goRun(t, dir)
	if !strings.Contains(want, "files/a.txt") || !strings.Contains(want, "files/sub/b.bin") {
		t.Fatalf("the embedded program does not list its files:\n%s", want)
	}
	n, err := unembed(dir)
	if err != nil || n != 1 {
		t.Fatalf("unembed: %d rewritten, %v", n, err)
	}
	src, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	if strings.Contains(string(src), "go:embed") || strings.Contains(string(src), `"embed"`) {
		t.Fatalf("embed left in main.go:\n%s", src)
	}
	// The embedded files are gone from the tree: only the generated source can serve them.
	if err := os.RemoveAll(filepath.Join(dir, "files")); err != nil {
		t.Fatal(err)
	}
	if got := goRun(t, dir); got != want {
		t.Fatalf("rewritten package reads\n%s\nwant\n%s", got, want)
	}
}

func TestUnembedBadPattern(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nimport \"embed\"\n\n//go:embed nothing\nvar x embed.FS\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := unembed(dir); err == nil || !strings.Contains(err.Error(), `"nothing" matches nothing`) {
		t.Fatalf("want an error naming the pattern, got %v", err)
	}
}
