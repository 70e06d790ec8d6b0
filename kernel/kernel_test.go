package kernel

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestInitramfsWithCpio(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("cpio missing under CI (.ci/deps installs it)")
		}
		t.Skip("cpio not installed: cannot cross-check the archive (apt-get install cpio)")
	}
	dir := t.TempDir()
	host := filepath.Join(dir, "host.bin")
	os.WriteFile(host, []byte("binary\x00content"), 0o644)
	f := NewInitramfs()
	f.Dir("/proc")
	f.File("/etc/forkfuzz/agent.json", 0o644, []byte(`{"x":1}`))
	f.HostFile("/forkfuzz", 0o755, host)
	f.Symlink("/init", "/forkfuzz")
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", buf.Len())
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	cmd := exec.Command(cpio, "-idm", "--quiet")
	cmd.Dir = out
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v: %s", err, b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "etc/forkfuzz/agent.json")); string(b) != `{"x":1}` {
		t.Errorf("agent.json: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "forkfuzz")); string(b) != "binary\x00content" {
		t.Errorf("forkfuzz: %q", b)
	}
	if st, err := os.Stat(filepath.Join(out, "forkfuzz")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("forkfuzz mode: %v %v", st, err)
	}
	if l, err := os.Readlink(filepath.Join(out, "init")); err != nil || l != "/forkfuzz" {
		t.Errorf("init link: %q %v", l, err)
	}
	if st, err := os.Stat(filepath.Join(out, "proc")); err != nil || !st.IsDir() {
		t.Errorf("proc: %v", err)
	}
	list := exec.Command(cpio, "-it", "--quiet")
	list.Stdin = bytes.NewReader(buf.Bytes())
	b, _ := list.Output()
	want := []string{"etc", "etc/forkfuzz", "etc/forkfuzz/agent.json", "forkfuzz", "init", "proc"}
	if got := strings.Fields(string(b)); !reflect.DeepEqual(got, want) {
		t.Errorf("listing %v, want %v", got, want)
	}
}

func TestDebianKernelModules(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches Debian's " + DefaultImagePackage + " (about 27 MB, cached): skipped under -short")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("no apt-get: cannot fetch Debian packages")
	}
	d, err := FetchDebian(DefaultImagePackage, CacheDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := IndexModules(d.Modules)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := idx.Resolve(VirtioModules...)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mods {
		names = append(names, strings.TrimSuffix(filepath.Base(m), ".ko"))
	}
	pos := map[string]int{}
	for i, n := range names {
		pos[n] = i
	}
	for _, pair := range [][2]string{{"virtio", "virtio_console"}, {"virtio_ring", "virtio_console"}, {"virtio", "virtio_pci"}} {
		a, okA := pos[pair[0]]
		b, okB := pos[pair[1]]
		if !okA || !okB || a > b {
			t.Errorf("load order %v: want %s before %s", names, pair[0], pair[1])
		}
	}
	if _, err := idx.Resolve("no_such_module"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing module: %v", err)
	}
	r, err := Check(d.Image)
	if err != nil || !r.OK() {
		t.Errorf("Debian kernel check: %v\n%v", err, r)
	}
}
