package prog

import (
	"fmt"
	"strings"
)

// One descriptor table per enum: its name in the text format, the Linux
// constant it stands for, and the properties the generator, the model and
// the executors read. Each table is an array of the enum's count, indexed
// by value, so a value without an entry is a zero entry that
// TestDescriptorTables rejects, and the counts below are what every
// interpreter's table test iterates (see "Adding an operation" in doc.go).

// Counts of each enum's values (0..N-1 are valid).
const (
	NumOpKinds     = int(numOpKinds)
	NumAdvices     = int(numAdvices)
	NumRegionKinds = int(numRegionKinds)
	NumTHPs        = int(numTHPs)
	NumProts       = int(numProts)
	NumMremapFlags = 3 // bits of MremapFlags
	NumPolicies    = int(numPolicies)
	NumAnonNames   = int(numAnonNames)
	NumFS          = int(numFS)
)

// OpInfo describes an operation kind.
type OpInfo struct {
	Name string // in the text format
	// Syscall is the Linux system call the executor makes for it (""
	// for harness operations: check reads /proc and memory, join waits
	// for a thread).
	Syscall string
	// Range: takes Region, Off, Len and changes mappings (HasRange).
	Range bool
	// Slots: writes Count slots at Off + k*Stride (WritesSlots).
	Slots bool
	// IORange: addresses a page-aligned Region, Off, Len without
	// changing mappings (HasIORange).
	IORange bool
	// Until: runs on a thread, over and over, until the main thread has
	// executed the wait of fork Fork (RunsUntil: storeloop, migrateloop).
	Until bool
	// Pinned: reaches memory outside the user fault path (pinned.go).
	Pinned bool
	// Example is a minimal valid program that uses the kind: every
	// interpreter's table test runs it.
	Example string
}

const exampleHead = "forkfuzz v1\nregion r0 anon-private pages=4 thp=default\nregion r1 memfd-shared pages=4 thp=default\n"

var opTable = [numOpKinds]OpInfo{
	OpStore:     {Name: "store", Slots: true, Example: "store r0 off=0x0 count=2 stride=0x8"},
	OpPwrite:    {Name: "pwrite", Syscall: "pwrite64", Slots: true, Example: "pwrite r1 off=0x0 count=2 stride=0x8"},
	OpMmap:      {Name: "mmap", Syscall: "mmap", Range: true, Example: "munmap r0 off=0x0 len=0x1000\nmmap r0 off=0x0 len=0x1000"},
	OpMunmap:    {Name: "munmap", Syscall: "munmap", Range: true, Example: "munmap r0 off=0x1000 len=0x1000"},
	OpMprotect:  {Name: "mprotect", Syscall: "mprotect", Range: true, Example: "mprotect r0 off=0x0 len=0x1000 prot=r"},
	OpMadvise:   {Name: "madvise", Syscall: "madvise", Range: true, Example: "store r0 off=0x0 count=1 stride=0x8\nmadvise r0 off=0x0 len=0x1000 advice=dontneed"},
	OpMremap:    {Name: "mremap", Syscall: "mremap", Range: true, Example: "mremap r0 off=0x0 len=0x1000 newlen=0x2000 flags=maymove"},
	OpMlock:     {Name: "mlock", Syscall: "mlock", Range: true, Example: "mlock r0 off=0x0 len=0x1000"},
	OpMunlock:   {Name: "munlock", Syscall: "munlock", Range: true, Example: "mlock r0 off=0x0 len=0x1000\nmunlock r0 off=0x0 len=0x1000"},
	OpFork:      {Name: "fork", Syscall: "fork", Example: "fork f0\nwait f0"},
	OpWait:      {Name: "wait", Syscall: "wait4", Example: "fork f0\nf0: store r0 off=0x0 count=1 stride=0x8\nwait f0"},
	OpKill:      {Name: "kill", Syscall: "kill", Example: "fork f0\nkill f0\nwait f0"},
	OpCheck:     {Name: "check", Example: "store r0 off=0x0 count=1 stride=0x8\ncheck"},
	OpStoreLoop: {Name: "storeloop", Slots: true, Until: true, Example: "t1: storeloop r0 off=0x0 count=4 stride=0x8 until=f0\nfork f0\nwait f0\njoin t1"},
	OpJoin:      {Name: "join", Example: "t1: store r0 off=0x0 count=1 stride=0x8\njoin t1"},
	OpProcMem:   {Name: "procmem", Syscall: "pwrite64", Slots: true, Pinned: true, Example: "procmem r0 off=0x0 count=2 stride=0x8"},
	OpPVWrite:   {Name: "pvwrite", Syscall: "process_vm_writev", Slots: true, Pinned: true, Example: "pvwrite r0 off=0x0 count=2 stride=0x8"},
	OpODirect:   {Name: "odirect", Syscall: "pread64", IORange: true, Pinned: true, Example: "odirect r0 off=0x0 len=0x1000"},
	OpVmsplice:  {Name: "vmsplice", Syscall: "vmsplice", IORange: true, Pinned: true, Example: "store r0 off=0x0 count=1 stride=0x8\nvmsplice r0 off=0x0 len=0x1000 pipe=p0\nreadpipe p0"},
	OpReadPipe:  {Name: "readpipe", Syscall: "read", Pinned: true, Example: "store r0 off=0x0 count=1 stride=0x8\nvmsplice r0 off=0x0 len=0x1000 pipe=p0\nreadpipe p0"},
	OpUringReg:  {Name: "uringreg", Syscall: "io_uring_register", IORange: true, Pinned: true, Example: "uringreg r0 off=0x0 len=0x1000"},
	OpUringRead: {Name: "uringread", Syscall: "io_uring_enter", IORange: true, Pinned: true, Example: "uringreg r0 off=0x0 len=0x1000\nuringread r0 off=0x0 len=0x1000"},
	OpUffdWP:    {Name: "uffdwp", Syscall: "ioctl", IORange: true, Pinned: true, Example: "uffdwp r0 off=0x0 len=0x1000\nstore r0 off=0x0 count=1 stride=0x8"},
	OpMigrate:   {Name: "migrate", Syscall: "move_pages", IORange: true, Example: "store r0 off=0x0 count=1 stride=0x8\nmigrate r0 off=0x0 len=0x4000"},
	OpMigrateLoop: {Name: "migrateloop", Syscall: "move_pages", IORange: true, Until: true,
		Example: "store r0 off=0x0 count=1 stride=0x8\nt1: migrateloop r0 off=0x0 len=0x4000 until=f0\nfork f0\nwait f0\njoin t1"},
	OpMlockOnfault: {Name: "mlockonfault", Syscall: "mlock2", Range: true, Example: "mlockonfault r0 off=0x1000 len=0x1000\nstore r0 off=0x1000 count=1 stride=0x8\nfork f0\nwait f0"},
	OpMbind:        {Name: "mbind", Syscall: "mbind", Range: true, Example: "mbind r0 off=0x1000 len=0x1000 policy=bind\nstore r0 off=0x1000 count=1 stride=0x8\nfork f0\nwait f0"},
	OpAnonName:     {Name: "anonname", Syscall: "prctl", Range: true, Example: "anonname r0 off=0x1000 len=0x1000 name=a\nfork f0\nwait f0"},
	OpPMadvise:     {Name: "pmadvise", Syscall: "process_madvise", Range: true, Example: "store r0 off=0x0 count=1 stride=0x8\npmadvise r0 off=0x0 len=0x2000 advice=pageout"},
	OpUffdReg: {Name: "uffdreg", Syscall: "ioctl", Range: true,
		Example: "store r0 off=0x0 count=1 stride=0x8\nuffdreg r0 off=0x0 len=0x3000\nstore r0 off=0x1000 count=1 stride=0x8\nfork f0\nf0: store r0 off=0x2000 count=1 stride=0x8\nf0: check\nwait f0\ncheck"},
	OpUffdUnreg: {Name: "uffdunreg", Syscall: "ioctl", Range: true,
		Example: "uffdreg r0 off=0x0 len=0x3000\nuffdunreg r0 off=0x1000 len=0x1000\nstore r0 off=0x1000 count=1 stride=0x8\nfork f0\nwait f0\ncheck"},
	OpRemapFile: {Name: "remapfile", Syscall: "remap_file_pages", Range: true,
		Example: "pwrite r1 off=0x3000 count=1 stride=0x8\nremapfile r1 off=0x0 len=0x1000 pgoff=0x3\nfork f0\nf0: check\nwait f0\ncheck"},
}

// Info describes the kind (the zero OpInfo for a value out of range).
func (k OpKind) Info() OpInfo {
	if int(k) < NumOpKinds {
		return opTable[k]
	}
	return OpInfo{}
}

func (k OpKind) String() string {
	if n := k.Info().Name; n != "" {
		return n
	}
	return fmt.Sprintf("op(%d)", k)
}

// OpKinds lists every operation kind.
func OpKinds() []OpKind {
	ks := make([]OpKind, NumOpKinds)
	for i := range ks {
		ks[i] = OpKind(i)
	}
	return ks
}

// HasRange reports whether operations of this kind take a region, off and len.
func (k OpKind) HasRange() bool { return k.Info().Range }

// WritesSlots reports whether operations of this kind write Count slots
// at Off + k*Stride (store, pwrite, storeloop, procmem, pvwrite).
func (k OpKind) WritesSlots() bool { return k.Info().Slots }

// RunsUntil reports whether operations of this kind run on a thread until
// the main thread has executed the wait of fork Fork (storeloop,
// migrateloop).
func (k OpKind) RunsUntil() bool { return k.Info().Until }

// Pinned reports whether the kind is one of the operations of pinned.go.
func (k OpKind) Pinned() bool { return k.Info().Pinned }

// HasIORange reports whether the kind takes a page-aligned Region/Off/Len
// that it reads or writes without changing mappings.
func (k OpKind) HasIORange() bool { return k.Info().IORange }

// Example is a minimal valid program that uses k (OpInfo.Example under a
// header with regions r0 anon-private and r1 memfd-shared of 4 pages).
func Example(k OpKind) *Program {
	p, err := Parse([]byte(exampleHead + k.Info().Example + "\n"))
	if err != nil {
		panic(fmt.Sprintf("prog: the example of %v does not parse: %v", k, err))
	}
	return p
}

// AdviceInfo describes a madvise advice.
type AdviceInfo struct {
	Name  string // in the text format
	Linux string // the MADV_ constant
	Value int    // its value on Linux (all architectures forkfuzz runs on)
	// What the reference model (checker) needs to predict its errno:
	// NotLocked: EINVAL on a VM_LOCKED mapping; AnonPrivateOnly: EINVAL
	// unless the mapping is private anonymous. (The simulated kernel
	// keeps its own rules, so the two stay independent witnesses.)
	NotLocked, AnonPrivateOnly bool
	// IgnoredOnShared: succeeds on shared mappings without changing them
	// (no VMA split).
	IgnoredOnShared bool
	// Populate: faults the range in (MADV_POPULATE_READ/WRITE): EINVAL
	// on a mapping without the access (PopulateWrite: without write),
	// EFAULT past the end of the backing object.
	Populate, PopulateWrite bool
	// Since is the first Linux release (major, minor) that knows the
	// advice (older ones answer EINVAL); zero: older than any kernel
	// forkfuzz runs on.
	Since [2]int
}

var adviceTable = [numAdvices]AdviceInfo{
	AdvDontneed:   {Name: "dontneed", Linux: "MADV_DONTNEED", Value: 4, NotLocked: true},
	AdvFree:       {Name: "free", Linux: "MADV_FREE", Value: 8, NotLocked: true, AnonPrivateOnly: true},
	AdvDontfork:   {Name: "dontfork", Linux: "MADV_DONTFORK", Value: 10},
	AdvDofork:     {Name: "dofork", Linux: "MADV_DOFORK", Value: 11},
	AdvWipeonfork: {Name: "wipeonfork", Linux: "MADV_WIPEONFORK", Value: 18, AnonPrivateOnly: true},
	AdvKeeponfork: {Name: "keeponfork", Linux: "MADV_KEEPONFORK", Value: 19},
	AdvHugepage:   {Name: "hugepage", Linux: "MADV_HUGEPAGE", Value: 14},
	AdvNohugepage: {Name: "nohugepage", Linux: "MADV_NOHUGEPAGE", Value: 15},
	AdvCollapse:   {Name: "collapse", Linux: "MADV_COLLAPSE", Value: 25},
	AdvPageout:    {Name: "pageout", Linux: "MADV_PAGEOUT", Value: 21, NotLocked: true},
	AdvCold:       {Name: "cold", Linux: "MADV_COLD", Value: 20, NotLocked: true},
	// KSM: sets (clears) VM_MERGEABLE on private mappings, silently does
	// nothing on shared ones; ksmd may then merge identical anonymous
	// pages into one write-protected KSM page (obs.ForkPages.KSM counts
	// the ones a fork met).
	AdvMergeable:   {Name: "mergeable", Linux: "MADV_MERGEABLE", Value: 12, IgnoredOnShared: true},
	AdvUnmergeable: {Name: "unmergeable", Linux: "MADV_UNMERGEABLE", Value: 13, IgnoredOnShared: true},
	// Prefault the range as a read or a write fault would, without
	// touching memory (Linux 5.14): a write populate of a private file
	// mapping gives the process private copies of the file's pages.
	AdvPopulateRead:  {Name: "populate_read", Linux: "MADV_POPULATE_READ", Value: 22, Populate: true, Since: [2]int{5, 14}},
	AdvPopulateWrite: {Name: "populate_write", Linux: "MADV_POPULATE_WRITE", Value: 23, Populate: true, PopulateWrite: true, Since: [2]int{5, 14}},
	// MADV_DONTNEED that VM_LOCKED mappings accept too (Linux 5.18).
	AdvDontneedLocked: {Name: "dontneed_locked", Linux: "MADV_DONTNEED_LOCKED", Value: 24, Since: [2]int{5, 18}},
}

// Info describes the advice (the zero AdviceInfo for a value out of range:
// its Linux value is -1, which no executor passes to madvise).
func (a Advice) Info() AdviceInfo {
	if int(a) < NumAdvices {
		return adviceTable[a]
	}
	return AdviceInfo{Value: -1}
}

func (a Advice) String() string {
	if n := a.Info().Name; n != "" {
		return n
	}
	return fmt.Sprintf("advice(%d)", a)
}

// Advices lists every advice.
func Advices() []Advice {
	as := make([]Advice, NumAdvices)
	for i := range as {
		as[i] = Advice(i)
	}
	return as
}

// RegionKindInfo describes how a region is backed.
type RegionKindInfo struct {
	Name string
	// Linux: the mmap flags of the region's mappings.
	Linux string
	// Shared: writes through the mapping reach the backing object.
	Shared bool
	// Memfd: backed by a file the executor holds open (a memfd, or a
	// regular file on FS) rather than anonymous: pwrite writes it.
	Memfd bool
	// Hugetlb: backed by 2 MiB hugetlb pages (MAP_HUGETLB|MAP_HUGE_2MB,
	// or a memfd created with MFD_HUGETLB|MFD_HUGE_2MB).
	Hugetlb bool
	// FS: the file system of a regular file behind the region (NoFS
	// for anonymous memory and memfds).
	FS FS
}

var regionKindTable = [numRegionKinds]RegionKindInfo{
	AnonPrivate:         {"anon-private", "MAP_PRIVATE|MAP_ANONYMOUS", false, false, false, NoFS},
	AnonShared:          {"anon-shared", "MAP_SHARED|MAP_ANONYMOUS", true, false, false, NoFS},
	MemfdPrivate:        {"memfd-private", "MAP_PRIVATE", false, true, false, NoFS},
	MemfdShared:         {"memfd-shared", "MAP_SHARED", true, true, false, NoFS},
	HugetlbPrivate:      {"hugetlb-private", "MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_2MB", false, false, true, NoFS},
	HugetlbShared:       {"hugetlb-shared", "MAP_SHARED|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_2MB", true, false, true, NoFS},
	MemfdHugetlbPrivate: {"memfd-hugetlb-private", "MAP_PRIVATE (memfd MFD_HUGETLB|MFD_HUGE_2MB)", false, true, true, NoFS},
	MemfdHugetlbShared:  {"memfd-hugetlb-shared", "MAP_SHARED (memfd MFD_HUGETLB|MFD_HUGE_2MB)", true, true, true, NoFS},
	TmpfsPrivate:        {"tmpfs-private", "MAP_PRIVATE (a file on tmpfs)", false, true, false, Tmpfs},
	TmpfsShared:         {"tmpfs-shared", "MAP_SHARED (a file on tmpfs)", true, true, false, Tmpfs},
	Ext4Private:         {"ext4-private", "MAP_PRIVATE (a file on ext4)", false, true, false, Ext4},
	Ext4Shared:          {"ext4-shared", "MAP_SHARED (a file on ext4)", true, true, false, Ext4},
}

// FSInfo describes a file system a file kind's region lives on.
type FSInfo struct {
	Name string
	// Magic is the file system's f_type in statfs (linux/magic.h).
	Magic int64
}

var fsTable = [numFS]FSInfo{
	NoFS:  {"", 0},
	Tmpfs: {"tmpfs", 0x01021994},
	Ext4:  {"ext4", 0xEF53},
}

// Info describes the file system (zero for a value out of range).
func (f FS) Info() FSInfo {
	if int(f) < int(numFS) {
		return fsTable[f]
	}
	return FSInfo{}
}

func (f FS) String() string { return f.Info().Name }

// FileSystems lists the file systems of the file kinds.
func FileSystems() []FS { return []FS{Tmpfs, Ext4} }

// FS is the file system of the regular file behind a region of kind k
// (NoFS: anonymous memory or a memfd).
func (k RegionKind) FS() FS { return k.Info().FS }

// FileKind is the file kind on f with the given sharing (MemfdPrivate or
// MemfdShared for NoFS).
func FileKind(f FS, shared bool) RegionKind {
	for k := RegionKind(0); k < numRegionKinds; k++ {
		if d := k.Info(); d.FS == f && d.Shared == shared && d.Memfd && !d.Hugetlb {
			return k
		}
	}
	return MemfdPrivate
}

// Info describes the kind (zero for a value out of range).
func (k RegionKind) Info() RegionKindInfo {
	if int(k) < NumRegionKinds {
		return regionKindTable[k]
	}
	return RegionKindInfo{}
}

func (k RegionKind) String() string {
	if n := k.Info().Name; n != "" {
		return n
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Shared reports whether writes through the mapping reach the backing object.
func (k RegionKind) Shared() bool { return k.Info().Shared }

// Memfd reports whether the region is backed by a file the executor
// holds open: a memfd, or a regular file (the file kinds).
func (k RegionKind) Memfd() bool { return k.Info().Memfd }

// Hugetlb reports whether the region is backed by 2 MiB hugetlb pages.
func (k RegionKind) Hugetlb() bool { return k.Info().Hugetlb }

// Base is the ordinary kind with the same sharing and backing: the memfd
// kind for a hugetlb memfd or a file kind, the anonymous kind for an
// anonymous hugetlb kind, the kind itself for the ordinary kinds.
func (k RegionKind) Base() RegionKind {
	if !k.Hugetlb() && k.FS() == NoFS {
		return k
	}
	switch d := k.Info(); {
	case d.Memfd && d.Shared:
		return MemfdShared
	case d.Memfd:
		return MemfdPrivate
	case d.Shared:
		return AnonShared
	}
	return AnonPrivate
}

// HugetlbPagesErr says why pages is not a valid size for a region of
// kind k ("" when it is).
func (k RegionKind) HugetlbPagesErr(pages int) string {
	if k.Hugetlb() && pages%HugetlbPages != 0 {
		return fmt.Sprintf(hugetlbPagesFmt, pages, k.String(), HugetlbPages)
	}
	return ""
}

const hugetlbPagesFmt = "pages %d of a %s region is not a multiple of %d (one 2 MiB huge page)"

// THPInfo describes a region's transparent-huge-page advice.
type THPInfo struct {
	Name  string
	Linux string // the MADV_ constant applied at creation ("": none)
}

var thpTable = [numTHPs]THPInfo{
	THPDefault: {"default", ""},
	THPOn:      {"on", "MADV_HUGEPAGE"},
	THPOff:     {"off", "MADV_NOHUGEPAGE"},
}

func (t THP) String() string {
	if int(t) < NumTHPs {
		return thpTable[t].Name
	}
	return fmt.Sprintf("thp(%d)", t)
}

// Info describes the THP advice (zero for a value out of range).
func (t THP) Info() THPInfo {
	if int(t) < NumTHPs {
		return thpTable[t]
	}
	return THPInfo{}
}

// ProtInfo describes an mprotect protection.
type ProtInfo struct {
	Name  string
	Linux string // the PROT_ constants
	Value int    // their value on Linux
	Read  bool
	Write bool
}

var protTable = [numProts]ProtInfo{
	ProtNone: {"none", "PROT_NONE", 0, false, false},
	ProtRead: {"r", "PROT_READ", 1, true, false},
	ProtRW:   {"rw", "PROT_READ|PROT_WRITE", 3, true, true},
}

// Info describes the protection (the zero ProtInfo, Value -1, for a value
// out of range).
func (p Prot) Info() ProtInfo {
	if int(p) < NumProts {
		return protTable[p]
	}
	return ProtInfo{Value: -1}
}

func (p Prot) String() string {
	if n := p.Info().Name; n != "" {
		return n
	}
	return fmt.Sprintf("prot(%d)", p)
}

// MremapFlagInfo describes one mremap flag bit.
type MremapFlagInfo struct {
	Flag  MremapFlags
	Name  string
	Linux string // the MREMAP_ constant
	Value int    // its value on Linux
}

// MremapFlagTable lists the mremap flag bits, in the order they print.
var mremapFlagTable = [NumMremapFlags]MremapFlagInfo{
	{MremapMaymove, "maymove", "MREMAP_MAYMOVE", 1},
	{MremapFixed, "fixed", "MREMAP_FIXED", 2},
	{MremapDontunmap, "dontunmap", "MREMAP_DONTUNMAP", 4},
}

// MremapFlagInfos lists the mremap flag bits.
func MremapFlagInfos() []MremapFlagInfo { return mremapFlagTable[:] }

// Linux returns the flags' value on Linux, or -1 if f has a bit no
// descriptor names.
func (f MremapFlags) Linux() int {
	v := 0
	for _, d := range mremapFlagTable {
		if f&d.Flag != 0 {
			v |= d.Value
		}
	}
	if f&^mremapAll != 0 {
		return -1
	}
	return v
}

func (f MremapFlags) String() string {
	if f == 0 {
		return "none"
	}
	var parts []string
	for _, n := range mremapFlagTable {
		if f&n.Flag != 0 {
			parts = append(parts, n.Name)
		}
	}
	if rest := f &^ mremapAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint8(rest)))
	}
	return strings.Join(parts, "|")
}

// PolicyInfo describes an mbind memory policy. Every policy but default
// and local names node 0, which every NUMA machine has.
type PolicyInfo struct {
	Name  string
	Linux string // the MPOL_ constant
	Value int    // its value on Linux
	// Node0: the nodemask holds node 0 (else it is empty).
	Node0 bool
}

var policyTable = [numPolicies]PolicyInfo{
	PolicyDefault:    {"default", "MPOL_DEFAULT", 0, false},
	PolicyPreferred:  {"preferred", "MPOL_PREFERRED", 1, true},
	PolicyBind:       {"bind", "MPOL_BIND", 2, true},
	PolicyInterleave: {"interleave", "MPOL_INTERLEAVE", 3, true},
	PolicyLocal:      {"local", "MPOL_LOCAL", 4, false},
}

// Info describes the policy (the zero PolicyInfo, Value -1, for a value
// out of range).
func (p Policy) Info() PolicyInfo {
	if int(p) < NumPolicies {
		return policyTable[p]
	}
	return PolicyInfo{Value: -1}
}

func (p Policy) String() string {
	if n := p.Info().Name; n != "" {
		return n
	}
	return fmt.Sprintf("policy(%d)", p)
}

// AnonNameInfo describes a name for an anonymous VMA.
type AnonNameInfo struct {
	Name string // in the text format
	// Linux is the string passed to PR_SET_VMA_ANON_NAME ("": a NULL
	// pointer, which removes the name).
	Linux string
}

var anonNameTable = [numAnonNames]AnonNameInfo{
	AnonNone: {"none", ""},
	AnonA:    {"a", "forkfuzz-a"},
	AnonB:    {"b", "forkfuzz-b"},
}

// Info describes the name (zero for a value out of range).
func (n AnonName) Info() AnonNameInfo {
	if int(n) < NumAnonNames {
		return anonNameTable[n]
	}
	return AnonNameInfo{}
}

func (n AnonName) String() string {
	if s := n.Info().Name; s != "" {
		return s
	}
	return fmt.Sprintf("name(%d)", n)
}

// The text format's words for each enum, in value order.
var (
	opNames         = names(opTable[:], func(d OpInfo) string { return d.Name })
	adviceNames     = names(adviceTable[:], func(d AdviceInfo) string { return d.Name })
	regionKindNames = names(regionKindTable[:], func(d RegionKindInfo) string { return d.Name })
	thpNames        = names(thpTable[:], func(d THPInfo) string { return d.Name })
	protNames       = names(protTable[:], func(d ProtInfo) string { return d.Name })
	policyNames     = names(policyTable[:], func(d PolicyInfo) string { return d.Name })
	anonNameNames   = names(anonNameTable[:], func(d AnonNameInfo) string { return d.Name })
)

// names lists the Name of each descriptor (the text format's enum words).
func names[T any](table []T, name func(T) string) []string {
	out := make([]string, len(table))
	for i, d := range table {
		out[i] = name(d)
	}
	return out
}
