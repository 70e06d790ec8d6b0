// Package cover turns the kernel coverage of runs (obs.Coverage, from
// KCOV in the executor) into guidance for a campaign: a program that
// reaches edges no earlier program reached enters an on-disk corpus, one
// per kernel build (WORKDIR/corpus/KERNEL-ID/), that mutation prefers;
// programs that reached new code of the fork and memory-management paths
// (kernel/fork.c and mm/*.c, by function name: funcs.txt) weigh more.
//
// Symbols come from the kernel itself (/proc/kallsyms, which the guest
// executor returns once when asked; the reference kernel boots with
// nokaslr, so KCOV PCs and kallsyms addresses agree) or from a System.map
// given to `forkfuzz cover`. Without symbols every PC counts the same.
package cover

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/forkfuzz/forkfuzz/corpus"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/ksyms"
	"github.com/forkfuzz/forkfuzz/kernel"
)

// funcs.txt: "file<TAB>function" for kernel/fork.c and mm/*.c of Linux
// 6.1 (go run ./campaign/cover/mkfuncs LINUX-SRC).
//
//go:embed funcs.txt
var funcsTxt string

var (
	funcFileOnce sync.Once
	funcFile     map[string]string
	fileFuncs    map[string]int
)

func loadFuncs() {
	funcFile = map[string]string{}
	fileFuncs = map[string]int{}
	for _, l := range strings.Split(funcsTxt, "\n") {
		file, fn, ok := strings.Cut(l, "\t")
		if !ok {
			continue
		}
		if _, dup := funcFile[fn]; !dup {
			funcFile[fn] = file
			fileFuncs[file]++
		}
	}
}

// ForkMMFile returns the file (kernel/fork.c or mm/NAME.c) that defines
// kernel function fn, or "" when fn is not on the fork and mm paths. GCC's
// clone suffixes (.constprop.0, .isra.0, .part.0, .cold) are ignored.
func ForkMMFile(fn string) string {
	funcFileOnce.Do(loadFuncs)
	if i := strings.IndexByte(fn, '.'); i > 0 {
		fn = fn[:i]
	}
	return funcFile[fn]
}

// FileFuncs is how many functions funcs.txt lists for file.
func FileFuncs(file string) int {
	funcFileOnce.Do(loadFuncs)
	return fileFuncs[file]
}

// Symbols maps kernel addresses to function names (internal/ksyms, the
// project's one symbolizer).
type Symbols = ksyms.Symbols

// ParseSymbols reads /proc/kallsyms or System.map text (ksyms.Parse).
func ParseSymbols(name string, r io.Reader) (*Symbols, error) { return ksyms.Parse(name, r) }

// LoadSymbols reads a symbol file (kallsyms or System.map).
func LoadSymbols(path string) (*Symbols, error) { return ksyms.Load(path) }

// forkMM reports whether pc lies in a fork or mm function.
func forkMM(s *Symbols, pc uint64) bool {
	fn, ok := s.Func(pc)
	return ok && ForkMMFile(fn) != ""
}

// Entry is one program of the corpus.
type Entry struct {
	Name     string // file name without extension
	Prog     *prog.Program
	NewEdges int // edges it reached first
	NewMM    int // fork/mm PCs it reached first
	// NewStates is the memory-state features it reached first (state.go).
	NewStates int
	Weight    int
	Picks     int // times Draw chose it
	Hits      int // its mutations that reached new edges or states
}

// Tracker is a campaign's coverage: what every run reached, and the corpus.
type Tracker struct {
	// Guided: mutation draws on the corpus. When false the tracker only
	// measures (a blind campaign).
	Guided bool
	Dir    string // WORKDIR/corpus/KERNEL-ID
	// SymbolsFrom names the cache file Open took the kernel's symbols
	// from ("": none was taken; symcache.go).
	SymbolsFrom string

	id          string // KERNEL-ID
	syms        *Symbols
	edges       map[uint32]struct{}
	pcs         map[uint64]struct{}
	states      map[uint64]struct{} // memory-state signal (state.go)
	mmPCs       int
	entries     []Entry
	totalWeight int
	unavailable string
	seen        bool // some run reported coverage
	csv         *os.File
	start       time.Time
	programs    int
	sched       schedule
}

// KernelID names a kernel build for the corpus directory: the first 16
// hex digits of the image's SHA-256, or "release-" plus its uname -r when
// the image is not at hand (the host kernel).
func KernelID(image, release string) string {
	if image != "" {
		if sum, err := kernel.FileSHA256(image); err == nil {
			return sum[:16]
		}
	}
	if release == "" {
		release = "unknown"
	}
	return "release-" + strings.NewReplacer("/", "_", " ", "_").Replace(release)
}

// Open opens (creating it) the corpus directory of one kernel build under
// workdir and loads the programs and coverage it holds. csvPath, when not
// empty, receives one line per program: seconds, programs, PCs, edges,
// fork/mm PCs, corpus size.
func Open(workdir, kernelID string, guided bool, csvPath string) (*Tracker, error) {
	t := &Tracker{Guided: guided, Dir: filepath.Join(workdir, "corpus", kernelID), id: kernelID,
		edges: map[uint32]struct{}{}, pcs: map[uint64]struct{}{}, states: map[uint64]struct{}{}, start: time.Now()}
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cover: %w", err)
	}
	if s, err := LoadSymbols(filepath.Join(t.Dir, "kallsyms")); err == nil {
		t.syms = s
	} else if text, err := cachedSymbols(kernelID); err == nil && text != "" {
		// A cache that does not parse is left to be replaced: the
		// target is asked as if there were none.
		if s, err := ParseSymbols("kallsyms", strings.NewReader(text)); err == nil {
			if err := os.WriteFile(filepath.Join(t.Dir, "kallsyms"), []byte(text), 0o644); err != nil {
				return nil, fmt.Errorf("cover: %w", err)
			}
			t.syms, t.SymbolsFrom = s, symbolsCachePath(kernelID)
		}
	}
	files, _ := filepath.Glob(filepath.Join(t.Dir, "*.ffz"))
	sort.Strings(files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".ffz")
		text, err := fsutil.ReadFileLimited(f, corpus.MaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("cover: %w", err)
		}
		p, err := prog.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("cover: corpus program %s: %w", f, err)
		}
		c, err := readCover(filepath.Join(t.Dir, name+".json"))
		if err != nil {
			return nil, err
		}
		states, err := readStates(filepath.Join(t.Dir, name+".states"))
		if err != nil {
			return nil, err
		}
		ne, nm := t.merge(c)
		t.addEntry(Entry{Name: name, Prog: p, NewEdges: ne, NewMM: nm, NewStates: t.mergeStates(states)})
	}
	if csvPath != "" {
		f, err := os.OpenFile(csvPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cover: %w", err)
		}
		fmt.Fprintln(f, "seconds,programs,pcs,edges,forkmm_pcs,corpus")
		t.csv = f
	}
	return t, nil
}

// maxCoverFile bounds a corpus entry's coverage file (JSON of its PCs and
// edges; a few MB for the largest programs).
const maxCoverFile = 256 << 20

func readCover(path string) (*obs.Coverage, error) {
	b, err := fsutil.ReadFileLimited(path, maxCoverFile)
	if err != nil {
		return nil, fmt.Errorf("cover: %w", err)
	}
	var c obs.Coverage
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("cover: %s: %w", path, err)
	}
	return &c, nil
}

// Close flushes the time series.
func (t *Tracker) Close() error {
	if t.csv != nil {
		return t.csv.Close()
	}
	return nil
}

// NeedSymbols reports whether the next run should ask for kallsyms.
func (t *Tracker) NeedSymbols() bool { return t.syms == nil && t.unavailable == "" }

// Symbols returns the symbols in use (nil: none).
func (t *Tracker) Symbols() *Symbols { return t.syms }

// SetSymbols installs kallsyms text and saves it beside the corpus and,
// for an image's kernel, in the cache (symcache.go). The fork/mm count of
// PCs seen so far is recomputed. The symbols are in use even when the
// error says they could not be cached.
func (t *Tracker) SetSymbols(text string) error {
	s, err := ParseSymbols("kallsyms", strings.NewReader(text))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(t.Dir, "kallsyms"), []byte(text), 0o644); err != nil {
		return fmt.Errorf("cover: %w", err)
	}
	t.syms = s
	t.mmPCs = 0
	for pc := range t.pcs {
		if forkMM(s, pc) {
			t.mmPCs++
		}
	}
	if err := cacheSymbols(t.id, text); err != nil {
		return fmt.Errorf("cover: the kernel's symbols are in use but not cached: %w", err)
	}
	return nil
}

// merge adds c to the totals and returns how many edges and fork/mm PCs
// were new.
func (t *Tracker) merge(c *obs.Coverage) (newEdges, newMM int) {
	for _, e := range c.Edges {
		if _, ok := t.edges[e]; !ok {
			t.edges[e] = struct{}{}
			newEdges++
		}
	}
	for _, pc := range c.PCs {
		if _, ok := t.pcs[pc]; !ok {
			t.pcs[pc] = struct{}{}
			if forkMM(t.syms, pc) {
				t.mmPCs++
				newMM++
			}
		}
	}
	return newEdges, newMM
}

// readStates reads an entry's memory-state signal (a JSON array of
// numbers); an entry without the file has none.
func readStates(path string) ([]uint64, error) {
	b, err := fsutil.ReadFileLimited(path, maxCoverFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cover: %w", err)
	}
	var st []uint64
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("cover: %s: %w", path, err)
	}
	return st, nil
}

func (t *Tracker) mergeStates(states []uint64) (n int) {
	for _, h := range states {
		if _, ok := t.states[h]; !ok {
			t.states[h] = struct{}{}
			n++
		}
	}
	return n
}

// weight: programs that reached new fork/mm code weigh most.
func weight(newEdges, newMM, newStates int) int {
	return 1 + bits.Len(uint(newEdges)) + 4*bits.Len(uint(newMM)) + 2*bits.Len(uint(newStates))
}

func (t *Tracker) addEntry(e Entry) {
	e.Weight = weight(e.NewEdges, e.NewMM, e.NewStates)
	t.entries = append(t.entries, e)
	t.totalWeight += e.Weight
}

// Gain is what one program's coverage added to the totals.
type Gain struct {
	NewEdges int // edges no earlier program reached
	NewMM    int // fork/mm PCs no earlier program reached
	// NewStates is the memory-state features no earlier program reached.
	NewStates int
	// NewFindings is how many findings never seen before the program
	// showed (set by the campaign, which judges it; Add leaves it 0).
	NewFindings int
}

// Add is AddRun without a memory-state signal.
func (t *Tracker) Add(p *prog.Program, c *obs.Coverage) (Gain, error) {
	return t.AddRun(p, c, nil)
}

// AddRun takes in the coverage and the memory-state signal (StateSignal)
// of program p's run and reports what they added; p enters the corpus
// when it reached new edges or new memory states. A nil or unavailable
// coverage is remembered for Status; the states count without it.
func (t *Tracker) AddRun(p *prog.Program, c *obs.Coverage, states []uint64) (Gain, error) {
	t.programs++
	defer t.row()
	var g Gain
	switch {
	case c == nil:
		if !t.seen && t.unavailable == "" {
			t.unavailable = "the target collects none"
		}
	case !c.Available():
		if !t.seen {
			t.unavailable = c.Unavailable
		}
	default:
		t.seen, t.unavailable = true, ""
		g.NewEdges, g.NewMM = t.merge(c)
	}
	g.NewStates = t.mergeStates(states)
	if g.NewEdges == 0 && g.NewStates == 0 {
		return g, nil
	}
	text := p.Format()
	sum := sha256.Sum256(text)
	name := hex.EncodeToString(sum[:8])
	var stored obs.Coverage
	if g.NewEdges > 0 {
		stored = *c
		stored.Symbols = ""
	}
	b, err := json.Marshal(&stored)
	if err != nil {
		return g, fmt.Errorf("cover: %w", err)
	}
	if err := os.WriteFile(filepath.Join(t.Dir, name+".json"), b, 0o644); err != nil {
		return g, fmt.Errorf("cover: %w", err)
	}
	if len(states) > 0 {
		sb, err := json.Marshal(states)
		if err != nil {
			return g, fmt.Errorf("cover: %w", err)
		}
		if err := os.WriteFile(filepath.Join(t.Dir, name+".states"), sb, 0o644); err != nil {
			return g, fmt.Errorf("cover: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(t.Dir, name+".ffz"), text, 0o644); err != nil {
		return g, fmt.Errorf("cover: %w", err)
	}
	t.addEntry(Entry{Name: name, Prog: p, NewEdges: g.NewEdges, NewMM: g.NewMM, NewStates: g.NewStates})
	return g, nil
}

func (t *Tracker) row() {
	if t.csv == nil {
		return
	}
	fmt.Fprintf(t.csv, "%.1f,%d,%d,%d,%d,%d\n", time.Since(t.start).Seconds(), t.programs, len(t.pcs), len(t.edges), t.mmPCs, len(t.entries))
}

// Counts are a tracker's totals.
type Counts struct {
	PCs, Edges, ForkMMPCs, Corpus int
	// States is the memory-state features reached (state.go).
	States  int
	Symbols bool
	// Drawn programs were scheduled by a guided tracker; FromCorpus of
	// them mutate a corpus program.
	Drawn, FromCorpus int
}

// Counts returns the totals so far.
func (t *Tracker) Counts() Counts {
	return Counts{PCs: len(t.pcs), Edges: len(t.edges), ForkMMPCs: t.mmPCs, Corpus: len(t.entries), States: len(t.states), Symbols: t.syms != nil,
		Drawn: t.sched.drawn, FromCorpus: t.sched.fromCorp}
}

// Status is one phrase for the progress line and the summary.
func (t *Tracker) Status() string {
	c := t.Counts()
	if !t.seen {
		states := ""
		if c.States > 0 {
			states = fmt.Sprintf("; memory states %d corpus %d", c.States, c.Corpus)
		}
		if t.unavailable != "" {
			return "coverage: unavailable (" + t.unavailable + ")" + states
		}
		return "coverage: -" + states
	}
	mm := "fork/mm n/a (no symbols)"
	if c.Symbols {
		mm = fmt.Sprintf("fork/mm %d", c.ForkMMPCs)
	}
	return fmt.Sprintf("cover %d pcs %d edges %s states %d corpus %d (%s)", c.PCs, c.Edges, mm, c.States, c.Corpus, t.scheduleStatus())
}

// ErrNoCorpus is returned by Report when workdir has no coverage corpus.
var ErrNoCorpus = errors.New("no coverage corpus (WORKDIR/corpus/*/ from a campaign on a KCOV kernel)")
