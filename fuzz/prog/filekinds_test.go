package prog

import "testing"

// TestFileKinds: every file kind parses and formats back unchanged, names
// its file system, has Base the memfd kind with its sharing, and takes a
// pwrite like a memfd; no other kind has a file system.
func TestFileKinds(t *testing.T) {
	want := map[RegionKind]struct {
		fs   FS
		base RegionKind
	}{
		TmpfsPrivate: {Tmpfs, MemfdPrivate}, TmpfsShared: {Tmpfs, MemfdShared},
		Ext4Private: {Ext4, MemfdPrivate}, Ext4Shared: {Ext4, MemfdShared},
	}
	for k := RegionKind(0); int(k) < NumRegionKinds; k++ {
		w, isFile := want[k]
		if !isFile {
			if k.FS() != NoFS {
				t.Errorf("%v: FS %v, want none", k, k.FS())
			}
			continue
		}
		if FileKind(w.fs, k.Shared()) != k {
			t.Errorf("FileKind(%v, %v) = %v, want %v", w.fs, k.Shared(), FileKind(w.fs, k.Shared()), k)
		}
		if k.FS() != w.fs || k.Base() != w.base || k.Shared() != w.base.Shared() || !k.Memfd() || k.Hugetlb() {
			t.Errorf("%v: FS %v Base %v shared %v memfd %v hugetlb %v", k, k.FS(), k.Base(), k.Shared(), k.Memfd(), k.Hugetlb())
		}
		text := "forkfuzz v1\nregion r0 " + k.String() + " pages=3 thp=off\npwrite r0 off=0x1000 count=2 stride=0x8\nfork f0\nf0: store r0 off=0x0 count=1 stride=0x8\nwait f0\n"
		p, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if p.Regions[0].Kind != k {
			t.Errorf("%v: parsed %+v", k, p.Regions[0])
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%v: %v", k, err)
		}
		if got := string(p.Format()); got != text {
			t.Errorf("%v: Format:\n%s\nwant\n%s", k, got, text)
		}
	}
	for _, f := range FileSystems() {
		if f.String() == "" || f.Info().Magic == 0 {
			t.Errorf("file system %d: %+v", f, f.Info())
		}
	}
	if FileKind(NoFS, true) != MemfdShared || FileKind(NoFS, false) != MemfdPrivate {
		t.Errorf("FileKind(NoFS) = %v, %v", FileKind(NoFS, true), FileKind(NoFS, false))
	}
	if NoFS.String() != "" || FS(99).String() != "" {
		t.Errorf("NoFS %q, FS(99) %q", NoFS, FS(99))
	}
}
