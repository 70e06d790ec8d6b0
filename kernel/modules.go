package kernel

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// VirtioModules are the modules a guest needs to reach the host over a
// virtio-serial port, for kernels that build them as modules (Debian's).
var VirtioModules = []string{"virtio_pci", "virtio_console"}

// ModuleIndex maps module names (with "-" spelled "_") to .ko files under a
// kernel's lib/modules/RELEASE directory.
type ModuleIndex struct {
	Dir   string
	paths map[string]string
}

// IndexModules walks dir for .ko files. Compressed modules are not
// supported (Debian 12's are not compressed).
func IndexModules(dir string) (*ModuleIndex, error) {
	idx := &ModuleIndex{Dir: dir, paths: map[string]string{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			idx.paths[modName(filepath.Base(p))] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index modules: %w", err)
	}
	return idx, nil
}

func modName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(file, ".ko"), "-", "_")
}

// Resolve returns the .ko files that load names, dependencies first (from
// each module's .modinfo "depends=", since a package's modules.dep is
// generated only when the package is installed). Names that are built into
// the kernel (listed in modules.builtin) are skipped.
func (idx *ModuleIndex) Resolve(names ...string) ([]string, error) {
	builtin := map[string]bool{}
	if b, err := readFileIfExists(filepath.Join(idx.Dir, "modules.builtin")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				builtin[modName(filepath.Base(l))] = true
			}
		}
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = modName(name)
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle through %s", name)
		case 2:
			return nil
		}
		p, ok := idx.paths[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) not found under %s", name, from, idx.Dir)
			}
			return fmt.Errorf("module %s not found under %s", name, idx.Dir)
		}
		state[name] = 1
		deps, err := moduleDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, p)
		return nil
	}
	for _, n := range names {
		if err := visit(n, ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleDepends reads "depends=" from a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
