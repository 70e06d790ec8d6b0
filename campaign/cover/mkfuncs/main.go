// Command mkfuncs lists the functions defined in a Linux source tree's
// fork and memory-management files, one "file<TAB>function" line each, for
// campaign/cover's funcs.txt:
//
//	go run ./campaign/cover/mkfuncs /path/to/linux > campaign/cover/funcs.txt
//
// It scans kernel/fork.c and mm/*.c (not subdirectories; not mm/nommu.c) for top-level
// definitions: a line at column 0 naming a function, "(" on it, and "{"
// opening the body before the next ";". SYSCALL_DEFINEn(name, ...) adds
// the names the syscall wrappers get (__do_sys_name, __x64_sys_name,
// __se_sys_name). It is a scan, not a parser: a few odd definitions are
// missed, which only makes them count as "other" code.
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

var (
	defRe = regexp.MustCompile(`^(?:[A-Za-z_][\w\s\*]*?[\s\*])?([A-Za-z_]\w*)\s*\(`)
	sysRe = regexp.MustCompile(`^(?:COMPAT_)?SYSCALL_DEFINE\d\((\w+)`)
	skip  = map[string]bool{"if": true, "for": true, "while": true, "switch": true, "return": true, "sizeof": true,
		"DEFINE_PER_CPU": true, "EXPORT_SYMBOL": true, "EXPORT_SYMBOL_GPL": true, "module_param": true,
		"__setup": true, "early_param": true, "core_initcall": true, "subsys_initcall": true, "late_initcall": true,
		"module_init": true, "arch_initcall": true, "postcore_initcall": true, "fs_initcall": true, "device_initcall": true,
		"DEFINE_STATIC_KEY_FALSE": true, "DEFINE_STATIC_KEY_TRUE": true, "DEFINE_SPINLOCK": true, "DEFINE_MUTEX": true,
		"LIST_HEAD": true, "DECLARE_WAIT_QUEUE_HEAD": true, "DEFINE_RWLOCK": true, "DEFINE_PER_CPU_READ_MOSTLY": true}
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkfuncs LINUX-SOURCE-DIR")
		os.Exit(2)
	}
	src := os.Args[1]
	files, _ := filepath.Glob(filepath.Join(src, "mm", "*.c"))
	// mm/nommu.c is built only without an MMU; its names are those of
	// mm/mmap.c and others, and would claim their functions.
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "nommu.c" })
	files = append(files, filepath.Join(src, "kernel", "fork.c"))
	sort.Strings(files)
	for _, f := range files {
		rel, _ := filepath.Rel(src, f)
		names, err := scan(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mkfuncs:", err)
			os.Exit(2)
		}
		for _, n := range names {
			fmt.Printf("%s\t%s\n", rel, n)
		}
	}
}

func scan(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var lines []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for i, l := range lines {
		if m := sysRe.FindStringSubmatch(l); m != nil {
			for _, p := range []string{"__do_sys_", "__x64_sys_", "__se_sys_", "__ia32_sys_"} {
				add(p + m[1])
			}
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "static const") || strings.Contains(l, "=") {
			continue
		}
		m := defRe.FindStringSubmatch(l)
		if m == nil || skip[m[1]] || strings.HasPrefix(m[1], "DEFINE_") {
			continue
		}
		// The body must open before a ";" ends a declaration.
		body := false
	look:
		for j := i; j < len(lines) && j < i+12; j++ {
			for _, c := range lines[j] {
				if c == ';' {
					break look
				}
				if c == '{' {
					body = true
					break look
				}
			}
		}
		if body {
			add(m[1])
		}
	}
	return out, nil
}
