package kernel

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// Initramfs is an initramfs under construction: a set of files and
// directories written as a newc cpio archive (uncompressed; the kernel
// unpacks it without a decompressor).
type Initramfs struct {
	entries map[string]entry
}

type entry struct {
	mode uint32 // type and permission bits
	data []byte // regular file content, or symlink target
	host string // regular file content from this host file (read at write time)
}

const (
	modeDir  = 0o040000
	modeReg  = 0o100000
	modeLink = 0o120000
)

// NewInitramfs returns an empty archive.
func NewInitramfs() *Initramfs { return &Initramfs{entries: map[string]entry{}} }

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// Dir adds a directory (and its parents).
func (f *Initramfs) Dir(p string) {
	p = clean(p)
	for p != "" && p != "." {
		if _, ok := f.entries[p]; !ok {
			f.entries[p] = entry{mode: modeDir | 0o755}
		}
		p = path.Dir(p)
		if p == "." {
			break
		}
	}
}

// File adds a file with content data.
func (f *Initramfs) File(p string, perm uint32, data []byte) {
	p = clean(p)
	f.Dir(path.Dir(p))
	f.entries[p] = entry{mode: modeReg | perm&0o7777, data: data}
}

// HostFile adds the host file host at p; it is read when the archive is
// written.
func (f *Initramfs) HostFile(p string, perm uint32, host string) {
	p = clean(p)
	f.Dir(path.Dir(p))
	f.entries[p] = entry{mode: modeReg | perm&0o7777, host: host}
}

// Symlink adds a symbolic link.
func (f *Initramfs) Symlink(p, target string) {
	p = clean(p)
	f.Dir(path.Dir(p))
	f.entries[p] = entry{mode: modeLink | 0o777, data: []byte(target)}
}

// Names lists the archive's paths in the order they are written.
func (f *Initramfs) Names() []string {
	names := make([]string, 0, len(f.entries))
	for n := range f.entries {
		if n != "" && n != "." {
			names = append(names, n)
		}
	}
	// Parents before children: sort by path, which puts "a" before "a/b".
	sort.Strings(names)
	return names
}

// WriteTo writes the archive in the newc format.
func (f *Initramfs) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	ino := uint32(1)
	for _, name := range f.Names() {
		e := f.entries[name]
		data := e.data
		if e.host != "" {
			b, err := os.ReadFile(e.host)
			if err != nil {
				return cw.n, fmt.Errorf("initramfs: %w", err)
			}
			data = b
		}
		nlink := uint32(1)
		if e.mode&0o170000 == modeDir {
			nlink = 2
		}
		if err := writeHeader(cw, ino, e.mode, nlink, uint32(len(data)), name); err != nil {
			return cw.n, err
		}
		cw.Write(data)
		cw.pad()
		ino++
	}
	if err := writeHeader(cw, 0, 0, 1, 0, "TRAILER!!!"); err != nil {
		return cw.n, err
	}
	return cw.n, cw.err
}

func writeHeader(cw *countWriter, ino, mode, nlink, size uint32, name string) error {
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize, check
	fmt.Fprintf(cw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	io.WriteString(cw, name)
	cw.Write([]byte{0})
	cw.pad()
	return cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.Write(make([]byte, 4-r))
	}
}

// WriteFile writes the archive to path (atomically, through a temporary
// file beside it).
func (f *Initramfs) WriteFile(p string) error {
	tmp, err := os.CreateTemp(path.Dir(p), ".initramfs-*")
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := f.WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return os.Rename(tmp.Name(), p)
}
