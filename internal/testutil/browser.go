package testutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// Chromium returns a headless-capable Chromium. Without one the test is
// skipped, or fails under CI=true (.ci/deps installs Debian's chromium).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH under CI=true (.ci/deps installs the chromium package)")
	}
	t.Skip("no chromium on PATH: the browser test needs Debian's chromium package (apt-get install chromium)")
	return ""
}

// chromium runs a headless Chromium with a fresh profile on url with the
// extra flags and returns its standard output.
func chromium(t testing.TB, bin, url string, extra ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile, "--hide-scrollbars", "--virtual-time-budget=2000"}
	args = append(append(args, extra...), url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", bin, url, err)
	}
	return out
}

// DumpDOM loads url in headless Chromium and returns the document after
// its load handlers ran.
func DumpDOM(t testing.TB, bin, url string) string {
	t.Helper()
	return string(chromium(t, bin, url, "--dump-dom"))
}

// Screenshot saves a PNG of url, width by height pixels, to out.
func Screenshot(t testing.TB, bin, url, out string, width, height int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(out)
	chromium(t, bin, url, "--screenshot="+abs, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height))
	b, err := os.ReadFile(abs)
	if err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("screenshot of %s: no PNG at %s (%v)", url, abs, err)
	}
}

// BodyAttr returns attribute name of the <body> element in a dumped DOM.
func BodyAttr(dom, name string) string {
	m := regexp.MustCompile(`<body[^>]*\s` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		return ""
	}
	return m[1]
}

// ArtifactDir is where browser tests keep screenshots: $FORKFUZZ_ARTIFACTS,
// or testdata/out of the test's package.
func ArtifactDir(t testing.TB) string {
	if d := os.Getenv("FORKFUZZ_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "out")
}
