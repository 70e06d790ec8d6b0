package kernel

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fake kernel tree whose Makefile and merge_config.sh record what Build
// asks of them: the orchestration is tested without compiling a kernel.
func fakeTree(t *testing.T) string {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "scripts/kconfig"), 0o755)
	os.WriteFile(filepath.Join(src, "Makefile"), []byte(`
x86_64_defconfig:
	echo CONFIG_MMU=y > $(O)/.config
	echo "# CONFIG_KCOV is not set" >> $(O)/.config
kvm_guest.config:
	echo CONFIG_VIRTIO_PCI=y >> $(O)/.config
olddefconfig:
	grep -v NOT_IN_THIS_TREE $(O)/.config > $(O)/.config.new; mv $(O)/.config.new $(O)/.config
bzImage:
	mkdir -p $(O)/arch/x86/boot && echo image > $(O)/arch/x86/boot/bzImage && echo elf > $(O)/vmlinux
`), 0o644)
	os.WriteFile(filepath.Join(src, "scripts/kconfig/merge_config.sh"), []byte(`#!/bin/sh
# merge_config.sh -m -O OUT BASE FRAGMENT: later lines win.
out=$3; base=$4; frag=$5
cat "$base" "$frag" | grep -v '^#' > "$out/.config.m"
echo CONFIG_NOT_IN_THIS_TREE=y >> "$out/.config.m"
awk -F= '{v[$1]=$0; if(!($1 in seen)){o[n++]=$1; seen[$1]=1}} END{for(i=0;i<n;i++) print v[o[i]]}' "$out/.config.m" > "$out/.config"
`), 0o755)
	return src
}

func TestBuildFakeTree(t *testing.T) {
	src := fakeTree(t)
	var log bytes.Buffer
	res, err := Build(BuildOptions{Src: src, Jobs: 2, Log: &log, skipToolCheck: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	cfg, err := ReadConfig(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CONFIG_MMU", "CONFIG_VIRTIO_PCI", "CONFIG_KCOV", "CONFIG_FAULT_INJECTION", "CONFIG_PAGE_TABLE_CHECK"} {
		if cfg[k] != "y" {
			t.Errorf("%s = %q in the generated config", k, cfg[k])
		}
	}
	if b, _ := os.ReadFile(res.Image); string(b) != "image\n" {
		t.Errorf("image %s: %q", res.Image, b)
	}
	for _, want := range []string{"x86_64_defconfig", "kvm_guest.config", "olddefconfig", "-j2 bzImage"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("build log lacks %q:\n%s", want, log.String())
		}
	}
	if len(res.Missing) != 0 {
		t.Errorf("missing %v", res.Missing)
	}
}

func TestCheckConfigs(t *testing.T) {
	good, _ := ParseConfig([]byte(Fragment + "\nCONFIG_MMU=y\nCONFIG_SHMEM=y\nCONFIG_PROC_FS=y\nCONFIG_SYSFS=y\n"))
	r := CheckConfig(good, "fragment")
	if !r.OK() {
		t.Errorf("the fragment itself is not OK:\n%s", r)
	}
	for _, c := range r.Caps {
		if len(c.Missing) > 0 && !strings.Contains(c.Name, "KASAN") && c.Name != asyncForkCap {
			t.Errorf("the fragment lacks %v for %s", c.Missing, c.Name)
		}
	}
	bad, _ := ParseConfig([]byte("CONFIG_MMU=y\nCONFIG_VIRTIO_CONSOLE=m\n"))
	r = CheckConfig(bad, "bad")
	if r.OK() || !strings.Contains(r.String(), "NO!  VM agent") || !strings.Contains(r.String(), "missing CONFIG_BLK_DEV_INITRD") {
		t.Errorf("bad config:\n%s", r)
	}
}

func TestCheckAsyncFork(t *testing.T) {
	stock, _ := ParseConfig([]byte(Fragment + "\nCONFIG_MEMCG=y\n"))
	if r := CheckConfig(stock, "stock"); r.HasAsyncFork() || !strings.Contains(r.String(), "NO   Async-fork") {
		t.Errorf("a stock configuration has Async-fork:\n%s", r)
	}
	af, _ := ParseConfig([]byte(Fragment + "\nCONFIG_MEMCG=y\nCONFIG_ASYNC_FORK=y\nCONFIG_ASYNC_FORK_GUP_FIXUP=y\n"))
	if r := CheckConfig(af, "asyncfork"); !r.HasAsyncFork() || !strings.Contains(r.String(), "yes  Async-fork") || !strings.Contains(r.String(), "CONFIG_ASYNC_FORK_GUP_FIXUP=y") {
		t.Errorf("an Async-fork configuration is not recognised:\n%s", r)
	}
}

func TestFindConfig(t *testing.T) {
	dir := t.TempDir()
	// An "image" embedding a gzip-compressed IKCONFIG blob.
	var cfg bytes.Buffer
	zw := gzip.NewWriter(&cfg)
	zw.Write([]byte("CONFIG_KCOV=y\nCONFIG_MMU=y\n"))
	zw.Close()
	hdr := func(rest string) []byte { return append(append(make([]byte, 0x202), "HdrS"...), rest...) }
	img := append(hdr("kernel..IKCFG_ST"), cfg.Bytes()...)
	img = append(img, "IKCFG_ED..."...)
	p := filepath.Join(dir, "bzImage")
	os.WriteFile(p, img, 0o644)
	c, src, err := FindConfig(p)
	if err != nil || c["CONFIG_KCOV"] != "y" || !strings.Contains(src, "IKCONFIG") {
		t.Errorf("embedded: %v %q %v", c, src, err)
	}
	// An image without one, with config-VERSION beside it.
	p = filepath.Join(dir, "vmlinuz-6.1.0-test")
	os.WriteFile(p, hdr(" no config here"), 0o644)
	if _, _, err := FindConfig(p); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Errorf("no config: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config-6.1.0-test"), []byte("CONFIG_MMU=y\n"), 0o644)
	if c, src, err := FindConfig(p); err != nil || c["CONFIG_MMU"] != "y" || filepath.Base(src) != "config-6.1.0-test" {
		t.Errorf("beside: %v %q %v", c, src, err)
	}
	// Neither an image nor a .config: an ELF program, a text file.
	for name, text := range map[string]string{"ls": "\x7fELF\x02\x01 a program", "notes.txt": "hello"} {
		p = filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		var ne *NotImageError
		if _, _, err := FindConfig(p); !errors.As(err, &ne) {
			t.Errorf("%s: %v, want a NotImageError", name, err)
		}
	}
	// The reference kernel, when present.
	if m, _ := filepath.Glob("../../shared/kernels/bzImage-*"); len(m) > 0 {
		r, err := Check(m[0])
		if err != nil || !r.OK() {
			t.Errorf("reference kernel: %v\n%v", err, r)
		}
	}
}

// --debug-info asks for DWARF line tables and keeps the vmlinux beside
// the image.
func TestBuildFakeTreeDebugInfo(t *testing.T) {
	src := fakeTree(t)
	var log bytes.Buffer
	res, err := Build(BuildOptions{Src: src, Jobs: 2, DebugInfo: true, Log: &log, skipToolCheck: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	cfg, err := ReadConfig(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	if cfg["CONFIG_DEBUG_INFO_DWARF5"] != "y" || cfg["CONFIG_DEBUG_INFO_REDUCED"] != "y" {
		t.Errorf("config: DWARF5 %q, REDUCED %q", cfg["CONFIG_DEBUG_INFO_DWARF5"], cfg["CONFIG_DEBUG_INFO_REDUCED"])
	}
	if b, _ := os.ReadFile(res.Vmlinux); string(b) != "elf\n" || filepath.Base(res.Vmlinux) != "vmlinux-forkfuzz" {
		t.Errorf("vmlinux %q: %q", res.Vmlinux, b)
	}
	if len(res.Missing) != 0 {
		t.Errorf("missing %v", res.Missing)
	}
	// Without it, no vmlinux is promised.
	res, err = Build(BuildOptions{Src: src, Jobs: 2, Log: &log, skipToolCheck: true})
	if err != nil || res.Vmlinux != "" {
		t.Errorf("without --debug-info: vmlinux %q, %v", res.Vmlinux, err)
	}
}
