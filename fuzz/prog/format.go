package prog

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The text format, version 1:
//
//	# comments start with '#', anywhere on a line
//	forkfuzz v1
//	arena low                 # optional: regions below the Go heap (see Arena); default top
//	region r0 anon-private pages=512 thp=on
//	region r1 memfd-shared pages=4 thp=default
//	store r0 off=0x1000 count=4 stride=0x8
//	fork f0
//	fork f2 fail_nth=3   # inject a fault at the 3rd failure point inside fork (main process only)
//	fork f3 childfail=2  # ... at the 2nd failure point of the child before user space (its copy)
//	f0: store r0 off=0x0 count=1 stride=0x8
//	f0: fork f1
//	f1: check
//	f0: wait f1
//	munmap r0 off=0x0 len=0x2000
//	mprotect r0 off=0x0 len=0x1000 prot=r
//	madvise r0 off=0x0 len=0x1000 advice=dontfork
//	mremap r0 off=0x0 len=0x1000 newlen=0x2000 flags=maymove|fixed to=r1 tooff=0x0
//	kill f0
//	wait f0
//	t1: storeloop r0 off=0x0 count=64 stride=0x8 until=f1   # a thread of the main process
//	fork f1
//	wait f1
//	join t1
//	procmem r0 off=0x0 count=2 stride=0x1000 into=f2   # see pinned.go
//	vmsplice r0 off=0x0 len=0x2000 pipe=p0
//	readpipe p0
//	migrate r0 off=0x0 len=0x4000                        # move pages to the next NUMA node
//	remapfile r1 off=0x0 len=0x2000 pgoff=0x10           # remap_file_pages: file page 0x10 on
//	t2: migrateloop r0 off=0x0 len=0x4000 until=f4       # ... back and forth while f4 forks
//
// The header line comes first; region lines come before operations and are
// numbered in order. An operation line may start with "fN:" to run it in
// the child of fork fN. Arguments are key=value pairs in any order; numbers
// are decimal or 0x-hex. Format prints the canonical form, which Parse reads
// back to an identical Program.

// SyntaxError is a parse error at a line and column (both 1-based).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// Format returns the canonical text of p.
func (p *Program) Format() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "forkfuzz v%d\n", Version)
	if p.Arena != ArenaTop {
		fmt.Fprintf(&b, "arena %v\n", p.Arena)
	}
	for i, r := range p.Regions {
		fmt.Fprintf(&b, "region r%d %v pages=%d thp=%v\n", i, r.Kind, r.Pages, r.THP)
	}
	for i := range p.Ops {
		b.WriteString(p.Ops[i].String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// String returns the canonical text of one operation.
func (op Op) String() string {
	var b strings.Builder
	if op.Proc > 0 {
		fmt.Fprintf(&b, "f%d: ", op.Proc-1)
	}
	if op.Thread > 0 {
		fmt.Fprintf(&b, "t%d: ", op.Thread)
	}
	b.WriteString(op.Kind.String())
	switch op.Kind {
	case OpStore, OpPwrite:
		fmt.Fprintf(&b, " r%d off=%#x count=%d stride=%#x", op.Region, op.Off, op.Count, op.Stride)
	case OpMmap, OpMunmap, OpMlock, OpMunlock, OpMlockOnfault, OpUffdReg, OpUffdUnreg:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x", op.Region, op.Off, op.Len)
	case OpMbind:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x policy=%v", op.Region, op.Off, op.Len, op.Policy)
	case OpAnonName:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x name=%v", op.Region, op.Off, op.Len, op.Name)
	case OpRemapFile:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x pgoff=%#x", op.Region, op.Off, op.Len, op.PgOff)
	case OpMprotect:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x prot=%v", op.Region, op.Off, op.Len, op.Prot)
	case OpMadvise, OpPMadvise:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x advice=%v", op.Region, op.Off, op.Len, op.Advice)
	case OpMremap:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x newlen=%#x flags=%s", op.Region, op.Off, op.Len, op.NewLen, op.Flags)
		if op.Flags&MremapFixed != 0 {
			fmt.Fprintf(&b, " to=r%d tooff=%#x", op.To, op.ToOff)
		}
	case OpFork, OpWait, OpKill:
		fmt.Fprintf(&b, " f%d", op.Fork)
		if op.Kind == OpFork && op.FailNth != 0 {
			fmt.Fprintf(&b, " fail_nth=%d", op.FailNth)
		}
		if op.Kind == OpFork && op.OOMMemcg != 0 {
			fmt.Fprintf(&b, " oom_memcg=%#x", op.OOMMemcg)
		}
		if op.Kind == OpFork && op.ChildFail != 0 {
			fmt.Fprintf(&b, " childfail=%d", op.ChildFail)
		}
		if op.Kind == OpFork && op.ChildOOM != 0 {
			fmt.Fprintf(&b, " child_oom=%#x", op.ChildOOM)
		}
		if op.Kind == OpFork && op.Hold != 0 {
			fmt.Fprintf(&b, " hold=%d", op.Hold)
		}
	case OpStoreLoop:
		fmt.Fprintf(&b, " r%d off=%#x count=%d stride=%#x until=f%d", op.Region, op.Off, op.Count, op.Stride, op.Fork)
	case OpJoin:
		fmt.Fprintf(&b, " t%d", op.Peer)
	case OpProcMem, OpPVWrite:
		fmt.Fprintf(&b, " r%d off=%#x count=%d stride=%#x", op.Region, op.Off, op.Count, op.Stride)
		if op.Into > 0 {
			fmt.Fprintf(&b, " into=f%d", op.Into-1)
		}
	case OpODirect, OpUringReg, OpUringRead, OpUffdWP, OpMigrate:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x", op.Region, op.Off, op.Len)
	case OpMigrateLoop:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x until=f%d", op.Region, op.Off, op.Len, op.Fork)
	case OpVmsplice:
		fmt.Fprintf(&b, " r%d off=%#x len=%#x pipe=p%d", op.Region, op.Off, op.Len, op.Pipe)
	case OpReadPipe:
		fmt.Fprintf(&b, " p%d", op.Pipe)
	}
	return b.String()
}

// token is a word of a line with its 1-based column.
type token struct {
	s   string
	col int
}

func tokenize(line string) []token {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	var toks []token
	for i := 0; i < len(line); {
		if line[i] == ' ' || line[i] == '\t' || line[i] == '\r' {
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\r' {
			j++
		}
		toks = append(toks, token{line[i:j], i + 1})
		i = j
	}
	return toks
}

type parser struct {
	line int
	prog *Program
}

// maxEcho bounds how much of an offending token an error message quotes.
const maxEcho = 64

func (ps *parser) errf(col int, format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > maxEcho {
			args[i] = truncated(s)
		}
	}
	return &SyntaxError{Line: ps.line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// truncated is a long token cut to maxEcho bytes (at a rune boundary) for
// an error message, saying how long it was.
func truncated(s string) string {
	n := maxEcho
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:n], len(s))
}

// Parse reads a program in the text format and validates it. Errors name
// the line and column (a *SyntaxError) or the operation (a *ValidationError
// wrapped with the line it came from).
func Parse(text []byte) (*Program, error) {
	ps := &parser{prog: &Program{}}
	header, arenaSeen := false, false
	var opLines []int
	for n, line := range strings.Split(string(text), "\n") {
		ps.line = n + 1
		toks := tokenize(line)
		if len(toks) == 0 {
			continue
		}
		if !header {
			if toks[0].s != "forkfuzz" || len(toks) != 2 {
				return nil, ps.errf(toks[0].col, "expected header %q", fmt.Sprintf("forkfuzz v%d", Version))
			}
			if toks[1].s != fmt.Sprintf("v%d", Version) {
				return nil, ps.errf(toks[1].col, "unsupported format version %q (this forkfuzz reads v%d)", toks[1].s, Version)
			}
			header = true
			continue
		}
		if toks[0].s == "arena" {
			if err := ps.parseArena(toks, arenaSeen); err != nil {
				return nil, err
			}
			arenaSeen = true
			continue
		}
		if toks[0].s == "region" {
			if len(ps.prog.Ops) > 0 {
				return nil, ps.errf(toks[0].col, "region after the first operation")
			}
			if err := ps.parseRegion(toks); err != nil {
				return nil, err
			}
			continue
		}
		if len(ps.prog.Ops) >= MaxOps {
			return nil, ps.errf(toks[0].col, "too many operations (max %d)", MaxOps)
		}
		if err := ps.parseOp(toks); err != nil {
			return nil, err
		}
		opLines = append(opLines, ps.line)
	}
	if !header {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: "empty program: missing header \"forkfuzz v1\""}
	}
	if err := ps.prog.Validate(); err != nil {
		if ve, ok := err.(*ValidationError); ok && ve.Op >= 0 && ve.Op < len(opLines) {
			return nil, fmt.Errorf("line %d: %w", opLines[ve.Op], err)
		}
		return nil, err
	}
	return ps.prog, nil
}

// parseArena parses "arena top" or "arena low", allowed once, before the
// first region.
func (ps *parser) parseArena(toks []token, seen bool) error {
	switch {
	case seen:
		return ps.errf(toks[0].col, "second arena line")
	case len(ps.prog.Regions) > 0 || len(ps.prog.Ops) > 0:
		return ps.errf(toks[0].col, "arena after the first region or operation")
	case len(toks) != 2:
		return ps.errf(toks[0].col, "arena needs one word: %s", strings.Join(arenaNames[:], " or "))
	}
	for i, n := range arenaNames {
		if n == toks[1].s {
			ps.prog.Arena = Arena(i)
			return nil
		}
	}
	return ps.errf(toks[1].col, "unknown arena %q (want %s)", toks[1].s, strings.Join(arenaNames[:], " or "))
}

func (ps *parser) parseRegion(toks []token) error {
	if len(toks) < 3 {
		return ps.errf(toks[0].col, "region needs a name and a kind")
	}
	idx, err := ps.ref(toks[1], 'r')
	if err != nil {
		return err
	}
	if idx != len(ps.prog.Regions) {
		return ps.errf(toks[1].col, "regions must be numbered in order: expected r%d", len(ps.prog.Regions))
	}
	var r Region
	kind := -1
	for i, n := range regionKindNames {
		if n == toks[2].s {
			kind = i
		}
	}
	if kind < 0 {
		return ps.errf(toks[2].col, "unknown region kind %q (want one of %s)", toks[2].s, strings.Join(regionKindNames[:], ", "))
	}
	r.Kind = RegionKind(kind)
	kv, err := ps.args(toks[3:], map[string]bool{"pages": true, "thp": false})
	if err != nil {
		return err
	}
	pages, err := ps.num(kv["pages"])
	if err != nil {
		return err
	}
	if pages < 1 || pages > MaxRegionPages {
		return ps.errf(kv["pages"].col, "pages %d out of range 1..%d", pages, MaxRegionPages)
	}
	if r.Kind.HugetlbPagesErr(int(pages)) != "" {
		return ps.errf(kv["pages"].col, hugetlbPagesFmt, pages, r.Kind.String(), HugetlbPages)
	}
	r.Pages = int(pages)
	if t, ok := kv["thp"]; ok {
		v, err := ps.enum(t, thpNames[:])
		if err != nil {
			return err
		}
		r.THP = THP(v)
	}
	ps.prog.Regions = append(ps.prog.Regions, r)
	return nil
}

// ref parses "r3" or "f2".
func (ps *parser) ref(t token, prefix byte) (int, error) {
	if len(t.s) < 2 || t.s[0] != prefix {
		return 0, ps.errf(t.col, "expected %c<number>, got %q", prefix, t.s)
	}
	v, err := strconv.ParseUint(t.s[1:], 10, 16)
	if err != nil {
		return 0, ps.errf(t.col, "bad number in %q", t.s)
	}
	return int(v), nil
}

// kvTok is the value part of key=value, with its column.
type kvTok = token

// args parses key=value tokens; want maps allowed keys to whether they are required.
func (ps *parser) args(toks []token, want map[string]bool) (map[string]kvTok, error) {
	kv := make(map[string]kvTok)
	for _, t := range toks {
		eq := strings.IndexByte(t.s, '=')
		if eq <= 0 {
			return nil, ps.errf(t.col, "expected key=value, got %q", t.s)
		}
		k := t.s[:eq]
		if _, ok := want[k]; !ok {
			return nil, ps.errf(t.col, "unknown argument %q", k)
		}
		if _, dup := kv[k]; dup {
			return nil, ps.errf(t.col, "duplicate argument %q", k)
		}
		kv[k] = kvTok{t.s[eq+1:], t.col + eq + 1}
	}
	for k, req := range want {
		if _, ok := kv[k]; req && !ok {
			col := 1
			if len(toks) > 0 {
				col = toks[len(toks)-1].col
			}
			return nil, ps.errf(col, "missing argument %s=", k)
		}
	}
	return kv, nil
}

func (ps *parser) num(t kvTok) (uint64, error) {
	v, err := strconv.ParseUint(t.s, 0, 64)
	if err != nil {
		return 0, ps.errf(t.col, "bad number %q", t.s)
	}
	return v, nil
}

func (ps *parser) enum(t kvTok, names []string) (int, error) {
	for i, n := range names {
		if n == t.s {
			return i, nil
		}
	}
	return 0, ps.errf(t.col, "unknown value %q (want one of %s)", t.s, strings.Join(names, ", "))
}

func (ps *parser) parseOp(toks []token) error {
	var op Op
	if strings.HasSuffix(toks[0].s, ":") {
		name := token{strings.TrimSuffix(toks[0].s, ":"), toks[0].col}
		if strings.HasPrefix(name.s, "t") {
			th, err := ps.ref(name, 't')
			if err != nil {
				return err
			}
			if th < 1 {
				return ps.errf(name.col, "threads are numbered from t1")
			}
			op.Thread = th
		} else {
			f, err := ps.ref(name, 'f')
			if err != nil {
				return err
			}
			op.Proc = f + 1
		}
		toks = toks[1:]
		if len(toks) == 0 {
			return ps.errf(1, "missing operation after process prefix")
		}
	}
	kind := -1
	for i, n := range opNames {
		if n == toks[0].s {
			kind = i
		}
	}
	if kind < 0 {
		return ps.errf(toks[0].col, "unknown operation %q", toks[0].s)
	}
	op.Kind = OpKind(kind)
	name := toks[0]
	rest := toks[1:]
	switch op.Kind {
	case OpCheck:
		if len(rest) != 0 {
			return ps.errf(rest[0].col, "check takes no arguments")
		}
	case OpJoin:
		if len(rest) != 1 {
			return ps.errf(name.col, "join takes one thread name (tN)")
		}
		th, err := ps.ref(rest[0], 't')
		if err != nil {
			return err
		}
		op.Peer = th
	case OpReadPipe:
		if len(rest) != 1 {
			return ps.errf(name.col, "readpipe takes one pipe name (pN)")
		}
		pn, err := ps.ref(rest[0], 'p')
		if err != nil {
			return err
		}
		op.Pipe = pn
	case OpFork, OpWait, OpKill:
		if len(rest) < 1 || (op.Kind != OpFork && len(rest) != 1) {
			return ps.errf(name.col, "%s takes one fork name (fN)", name.s)
		}
		f, err := ps.ref(rest[0], 'f')
		if err != nil {
			return err
		}
		op.Fork = f
		if op.Kind == OpFork {
			if err := ps.forkArgs(&op, rest[1:]); err != nil {
				return err
			}
		}
	default:
		if len(rest) == 0 {
			return ps.errf(name.col, "%s needs a region", name.s)
		}
		r, err := ps.ref(rest[0], 'r')
		if err != nil {
			return err
		}
		op.Region = r
		if err := ps.opArgs(&op, rest[1:]); err != nil {
			return err
		}
	}
	ps.prog.Ops = append(ps.prog.Ops, op)
	return nil
}

func (ps *parser) opArgs(op *Op, toks []token) error {
	kv, err := ps.args(toks, opWant(op.Kind))
	if err != nil {
		return err
	}
	if err := ps.opNums(op, kv); err != nil {
		return err
	}
	return ps.opNames(op, kv)
}

// opWant names the arguments of an operation of kind k: true for those
// it needs, false for those it may have.
func opWant(k OpKind) map[string]bool {
	var want map[string]bool
	switch k {
	case OpStore, OpPwrite:
		want = map[string]bool{"off": true, "count": false, "stride": false}
	case OpProcMem, OpPVWrite:
		want = map[string]bool{"off": true, "count": false, "stride": false, "into": false}
	case OpODirect, OpUringReg, OpUringRead, OpUffdWP, OpMigrate:
		want = map[string]bool{"off": true, "len": true}
	case OpMigrateLoop:
		want = map[string]bool{"off": true, "len": true, "until": true}
	case OpVmsplice:
		want = map[string]bool{"off": true, "len": true, "pipe": true}
	case OpStoreLoop:
		want = map[string]bool{"off": true, "count": false, "stride": false, "until": true}
	case OpMmap, OpMunmap, OpMlock, OpMunlock, OpMlockOnfault, OpUffdReg, OpUffdUnreg:
		want = map[string]bool{"off": true, "len": true}
	case OpMprotect:
		want = map[string]bool{"off": true, "len": true, "prot": true}
	case OpMadvise, OpPMadvise:
		want = map[string]bool{"off": true, "len": true, "advice": true}
	case OpMbind:
		want = map[string]bool{"off": true, "len": true, "policy": true}
	case OpAnonName:
		want = map[string]bool{"off": true, "len": true, "name": true}
	case OpRemapFile:
		want = map[string]bool{"off": true, "len": true, "pgoff": true}
	case OpMremap:
		want = map[string]bool{"off": true, "len": true, "newlen": true, "flags": false, "to": false, "tooff": false}
	}
	return want
}

// opNums sets op's numbers and references (fork, pipe) from kv.
func (ps *parser) opNums(op *Op, kv map[string]kvTok) error {
	nums := map[string]*uint64{"off": &op.Off, "len": &op.Len, "newlen": &op.NewLen, "stride": &op.Stride, "tooff": &op.ToOff, "pgoff": &op.PgOff}
	for k, dst := range nums {
		if t, ok := kv[k]; ok {
			v, err := ps.num(t)
			if err != nil {
				return err
			}
			*dst = v
		}
	}
	if t, ok := kv["until"]; ok {
		f, err := ps.ref(t, 'f')
		if err != nil {
			return err
		}
		op.Fork = f
	}
	if t, ok := kv["into"]; ok {
		f, err := ps.ref(t, 'f')
		if err != nil {
			return err
		}
		op.Into = f + 1
	}
	if t, ok := kv["pipe"]; ok {
		pn, err := ps.ref(t, 'p')
		if err != nil {
			return err
		}
		op.Pipe = pn
	}
	if op.Kind.WritesSlots() {
		op.Count = 1
		if t, ok := kv["count"]; ok {
			v, err := ps.num(t)
			if err != nil {
				return err
			}
			if v < 1 || v > MaxCount {
				return ps.errf(t.col, "count %d out of range 1..%d", v, MaxCount)
			}
			op.Count = int(v)
		}
		if _, ok := kv["stride"]; !ok {
			op.Stride = SlotSize
		}
	}
	return nil
}

// opNames sets op's named arguments (prot, advice, mremap flags and
// destination region) from kv.
func (ps *parser) opNames(op *Op, kv map[string]kvTok) error {
	if t, ok := kv["prot"]; ok {
		v, err := ps.enum(t, protNames[:])
		if err != nil {
			return err
		}
		op.Prot = Prot(v)
	}
	if t, ok := kv["advice"]; ok {
		v, err := ps.enum(t, adviceNames[:])
		if err != nil {
			return err
		}
		op.Advice = Advice(v)
	}
	if t, ok := kv["policy"]; ok {
		v, err := ps.enum(t, policyNames[:])
		if err != nil {
			return err
		}
		op.Policy = Policy(v)
	}
	if t, ok := kv["name"]; ok {
		v, err := ps.enum(t, anonNameNames[:])
		if err != nil {
			return err
		}
		op.Name = AnonName(v)
	}
	if t, ok := kv["flags"]; ok && t.s != "none" {
		col := t.col
		for _, part := range strings.Split(t.s, "|") {
			found := false
			for _, n := range mremapFlagTable {
				if n.Name == part {
					op.Flags |= n.Flag
					found = true
				}
			}
			if !found {
				return ps.errf(col, "unknown mremap flag %q (want maymove, fixed, dontunmap or none)", part)
			}
			col += len(part) + 1
		}
	}
	if t, ok := kv["to"]; ok {
		r, err := ps.ref(t, 'r')
		if err != nil {
			return err
		}
		op.To = r
	}
	return nil
}

// RoundTrip is the property the parser's fuzzers (the native FuzzParse and
// go-fuzz's FuzzParse in campaign/gofuzz) check: Parse never panics,
// rejects text only with a *SyntaxError or *ValidationError, and whatever
// it accepts formats to a canonical text that parses to the same program.
// It reports whether text was accepted, and an error when the property
// does not hold.
func RoundTrip(text []byte) (accepted bool, err error) {
	p, err := Parse(text)
	if err != nil {
		var se *SyntaxError
		var ve *ValidationError
		if !errors.As(err, &se) && !errors.As(err, &ve) {
			return false, fmt.Errorf("error of unexpected type %T: %v", err, err)
		}
		return false, nil
	}
	out := p.Format()
	q, err := Parse(out)
	if err != nil {
		return true, fmt.Errorf("canonical text does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(p, q) {
		return true, fmt.Errorf("round trip differs:\n%s\n%s", out, q.Format())
	}
	return true, nil
}
