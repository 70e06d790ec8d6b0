package campaign

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/campaign/reproc"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/minimize"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// Finding is a saved failure.
type Finding struct {
	Issue       judge.Issue
	Program     *prog.Program
	Observation *obs.Observation
	Minimized   *prog.Program
	MinObs      *obs.Observation
	MinIssue    judge.Issue // the issue as seen on the minimized program
	// Judged is what the verdict on the original run rested on
	// (judge.Verdict.Summary), so a reader knows what was not judged.
	Judged string
	// RunTime is how long the run that showed the finding took (a hang's
	// replays get twice as long).
	RunTime      time.Duration
	Target       string
	CampaignSeed uint64
	Index        int64
	ProgramSeed  uint64
	// Origin says how the program was drawn when that was not from
	// ProgramRand(CampaignSeed, Index) (Origin.Note): a guided campaign's
	// corpus mutations and its fresh programs after them.
	Origin     string
	Corrupt    string
	Replays    int // runs of the minimized program after minimizing
	Reproduced int // of which reproduced the signature
	MinRuns    int // target runs spent minimizing
	// TargetArgs are the `forkfuzz exec` flags that select the target as
	// the campaign ran it (Replay adds Corrupt and the program file).
	TargetArgs []string
	// Kernel identifies the kernel the finding was seen on.
	Kernel KernelID
	// Version is the forkfuzz that found it (version.String).
	Version string
	// Interrupted: minimization or its replays were cut short by a signal.
	Interrupted bool
	// NotRepeated: the program did not fail again on any of its
	// reruns (up to flakyReruns), so it was not minimized (Minimized is
	// the program itself).
	NotRepeated bool
	// MinTries is how many runs each minimization step got (at most):
	// the rerun on which the program failed again. 1 for a finding that
	// repeats at once; more for a race, whose steps would otherwise be
	// rejected on every run it happens not to fire.
	MinTries int
	// ReplayErrors counts replay runs that gave no verdict (refused at
	// the end of a budget, harness errors); they are not in Replays.
	ReplayErrors int
	// MinDropped, when set, is the minimized program that reproduced
	// in none of its replays while the original program did: some step
	// of the minimization was accepted on a run that failed for another
	// reason (a kernel report of an earlier run, a rare race). Minimized
	// is then the original program, and Reproduced/Replays its replays.
	MinDropped *prog.Program
	// MinDroppedReplays is how many replays MinDropped failed.
	MinDroppedReplays int
	// ReplayRuns are the runs of the last replay round, in order: what
	// each showed and how long it took (ReplayRunsNote).
	ReplayRuns []ReplayRun
	// NoCover: the run that showed it collected no kernel coverage (a
	// blind campaign collects it for some programs only); minimization
	// and replays run the same way, so KCOV's slowdown of the kernel
	// does not change a race's odds between them.
	NoCover bool
	// AimNote says how the replays aimed the forks' fail_nth at the
	// injection site the finding's run recorded (aim.go), AimRuns the
	// runs that took; "" when no fork of the program injects a fault
	// the kernel reported. Minimized starts from the aimed program.
	AimNote string
	AimRuns int
	// Sites, when set, are the fault sites to aim at where Observation
	// is not at hand (a distributed campaign's minimization request
	// carries AimSites of the run that showed it); else they come from
	// Observation.
	Sites Sites
	// NoCensus: the run that showed it took no page census at its forks
	// (campaigns take it for one program in Config.CensusEvery); its
	// minimization and replays run the same way: the census reads
	// /proc around every fork, which moves a race's timing.
	NoCensus bool
}

// Reduce minimizes f.Program while the same signature reproduces on target,
// spending at most maxRuns target runs (0: 300) and, if maxTime > 0, about
// that much time, then replays the result to state its reliability.
func Reduce(target agents.Target, f *Finding, maxRuns int, maxTime time.Duration, corrupt string) {
	ReduceContext(context.Background(), target, f, maxRuns, maxTime, corrupt)
}

// ReduceContext is Reduce that stops minimizing and replaying when ctx
// ends (a signal): f then keeps what was reached and says Interrupted.
func ReduceContext(ctx context.Context, target agents.Target, f *Finding, maxRuns int, maxTime time.Duration, corrupt string) {
	if maxRuns <= 0 {
		maxRuns = 300
	}
	// A hang is decided by runs with a longer timeout than the one it ran
	// out of: with the same, a slow program "reproduces" every time.
	opt := agents.Options{Corrupt: corrupt, Timeout: hangReplayTimeout(f), NoCover: f.NoCover, NoForkPages: f.NoCensus}
	sig := f.Issue.Signature
	runs := 0
	deadline := time.Now().Add(maxTime)
	sites := f.Sites
	if sites == nil {
		sites = AimSites(f.Observation)
	}
	// aimed: candidates that reproduced once their fail_nth was aimed
	// (aimStep), by program text, for the minimizer (minimize.Adjusted).
	aimed := map[string]*prog.Program{}
	reproduces := func(q *prog.Program) bool {
		for try := q; ; {
			if runs >= maxRuns || (maxTime > 0 && time.Now().After(deadline)) || ctx.Err() != nil {
				return false
			}
			runs++
			o, err := target.Run(try, opt)
			v, herr := judge.Judge(try, o, err)
			if back, _ := CameBack(sig, v); herr == nil && back {
				if try != q {
					aimed[string(q.Format())] = try
				}
				return true
			}
			if try != q {
				return false
			}
			a, n := aimStep(ctx, target, q, o, sites, opt, maxRuns-runs)
			runs += n
			if a == nil {
				return false
			}
			try = a
		}
	}
	// The program is minimized only if it fails again: a finding that
	// does not reproduce (a flaky harness error, a very rare race) would
	// make the minimizer spend its runs on attempts that all fail and
	// keep the program as it was; its replays below say how reliable it
	// is. A race that fires one run in two or three (migration-wp's
	// kernel BUG) fails again within flakyReruns, and then every step
	// gets as many runs as that took: with one run a step, most steps
	// were rejected because the race did not fire, not because the step
	// removed it, and such findings kept every op.
	base := f.Program
	if len(sites) > 0 {
		base, f.AimNote, f.AimRuns = Aim(ctx, target, f.Program, sites, opt, AimRuns)
	}
	min := base
	for f.MinTries = 1; f.MinTries <= flakyReruns; f.MinTries++ {
		if reproduces(base) {
			if a := aimed[string(base.Format())]; a != nil {
				base, min = a, a
			}
			break
		}
	}
	if f.MinTries <= flakyReruns {
		min, _ = minimize.Minimize(base, tries(f.MinTries, reproduces), minimize.MaxAttempts(maxRuns),
			minimize.Adjusted(func(q *prog.Program) *prog.Program { return aimed[string(q.Format())] }))
	} else {
		f.NotRepeated, f.MinTries = true, 0
	}
	f.Minimized, f.MinRuns = min, runs
	f.Interrupted = ctx.Err() != nil
	// Replays count runs that gave a verdict: a run the target refused
	// (the gate's budget is spent) or a harness error is not a failure
	// to reproduce. At most twice as many runs are tried.
	replay(ctx, target, f, min, opt)
	if f.Reproduced == 0 && f.Replays > 0 && !f.NotRepeated && len(min.Ops) < len(base.Ops) && !f.Interrupted {
		// The minimized program never failed again, though the original
		// did on its rerun: keep the original as the reproducer if it
		// still fails, and say what was dropped.
		dropped, n, nerr, runs := min, f.Replays, f.ReplayErrors, f.ReplayRuns
		f.Replays, f.ReplayErrors = 0, 0
		replay(ctx, target, f, base, opt)
		if f.Reproduced > 0 {
			f.MinDropped, f.MinDroppedReplays = dropped, n
			f.Minimized = base
			return
		}
		// Neither replays: report the minimized program's replays.
		f.Replays, f.Reproduced, f.ReplayErrors, f.ReplayRuns = n, 0, nerr, runs
	}
}

// tries returns a minimization step that runs a candidate up to k times
// and takes it at its first reproduction.
func tries(k int, reproduces func(*prog.Program) bool) func(*prog.Program) bool {
	return func(q *prog.Program) bool {
		for i := 0; i < k; i++ {
			if reproduces(q) {
				return true
			}
		}
		return false
	}
}

// triesNote says, for a finding that needed reruns to fail again, how
// many runs each minimization step got.
func (f *Finding) triesNote() string {
	if f.MinTries <= 1 {
		return ""
	}
	return fmt.Sprintf(", up to %d a step (it failed again on rerun %d of %d: a race)", f.MinTries, f.MinTries, flakyReruns)
}

// replay runs p, the finding's reproducer, up to `replays` times that
// give a verdict (at most twice as many runs) and counts in f how often
// it fails with the finding's signature.
func replay(ctx context.Context, target agents.Target, f *Finding, p *prog.Program, opt agents.Options) {
	sig := f.Issue.Signature
	f.Replays, f.Reproduced, f.ReplayRuns = 0, 0, nil
	enough := replaysEnough(f)
	for k := 0; k < 2*replays && f.Replays < replays && f.Reproduced < enough; k++ {
		if ctx.Err() != nil {
			f.Interrupted = true
			break
		}
		start := time.Now()
		o, err := target.Run(p, opt)
		v, herr := judge.Judge(p, o, err)
		f.ReplayRuns = append(f.ReplayRuns, NewReplayRun(sig, v, herr, time.Since(start)))
		if herr != nil {
			f.ReplayErrors++
			continue
		}
		f.Replays++
		back, as := CameBack(sig, v)
		if !back {
			continue
		}
		f.Reproduced++
		if f.MinObs == nil && as == sig {
			f.MinObs = o
			for _, is := range v.Issues {
				if is.Signature == sig {
					f.MinIssue = is
					break
				}
			}
		}
	}
}

// replays is how often a minimized program is replayed to state its
// reliability.
const replays = 5

// flakyReruns is how many reruns a finding gets to fail again before it
// is left unminimized.
const flakyReruns = 3

// ErrSealed: the finding was not written because the store's Seal was
// closed (the workdir's findings were already reported).
var ErrSealed = errors.New("findings: not written: the workdir was sealed after its report")

// Seal ends a FindingStore's writes: after Close returns, no Save writes
// any more, and none is half-way.
type Seal struct {
	mu     sync.Mutex
	sealed bool
}

// NewSeal returns an open seal.
func NewSeal() *Seal { return &Seal{} }

// Close seals; it waits for a save in progress to finish.
func (s *Seal) Close() {
	s.mu.Lock()
	s.sealed = true
	s.mu.Unlock()
}

func (s *Seal) hold() bool {
	s.mu.Lock()
	if s.sealed {
		s.mu.Unlock()
		return false
	}
	return true
}

func (s *Seal) release() { s.mu.Unlock() }

// FindingStore keeps one directory per signature under Dir/findings.
type FindingStore struct {
	Dir string
	// Seal, when set and closed, makes Save refuse to write (ErrSealed).
	Seal *Seal
	// Log, when set, gets a line about every finding directory Open
	// found incomplete or restored.
	Log io.Writer
	// Incomplete lists the finding directories Open found without their
	// program or report (not counted as saved: the next Save of their
	// signature replaces them).
	Incomplete []string
	// Pages returns more files for a finding's directory (campaign/report's
	// report.html and report.json), written on every Save; nil: none. The
	// caller passes it in (Config.FindingPages): this floor cannot import
	// the report package.
	Pages func(f *Finding) map[string][]byte
	seen  map[string]bool
	// known maps the signatures found on disk at Open to their directories.
	known map[string]string
}

// FindingCore are the files a finding directory must hold to count as
// saved: a directory without them (a copy cut short, a hand-made one)
// would otherwise keep its signature from ever being saved again.
var FindingCore = []string{"signature", "program.ffz", "report.txt"}

// maxSignatureFile bounds a finding's signature file.
const maxSignatureFile = 64 << 10

// ReadFindingSignature returns the signature of a complete finding
// directory, or an error saying what it lacks.
func ReadFindingSignature(dir string) (string, error) {
	for _, name := range FindingCore[1:] {
		if err := fsutil.CheckRegular(filepath.Join(dir, name), math.MaxInt64); err != nil {
			return "", fmt.Errorf("incomplete finding directory: %w", err)
		}
	}
	b, err := fsutil.ReadFileLimited(filepath.Join(dir, "signature"), maxSignatureFile)
	if err != nil {
		return "", fmt.Errorf("incomplete finding directory: %w", err)
	}
	sig := strings.TrimSpace(string(b))
	if sig == "" {
		return "", fmt.Errorf("incomplete finding directory: %s is empty", filepath.Join(dir, "signature"))
	}
	return sig, nil
}

// Open creates the store and loads the signatures already saved there.
// Only complete directories (FindingCore) count as saved; others are
// listed in Incomplete and logged. A finding that a kill caught between
// moving its old version aside and putting the new one in place is
// restored from the old version.
func (s *FindingStore) Open() error {
	s.seen = make(map[string]bool)
	s.known = make(map[string]string)
	s.Incomplete = nil
	if s.Dir == "" {
		return nil
	}
	root := filepath.Join(s.Dir, "findings")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("findings: %w", err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("findings: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".saving-") {
			s.recover(root, e.Name())
		}
	}
	if ents, err = os.ReadDir(root); err != nil {
		return fmt.Errorf("findings: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		sig, err := ReadFindingSignature(dir)
		if err != nil {
			s.Incomplete = append(s.Incomplete, dir)
			logf(s.Log, "findings: %s: %v; not counted as saved (its signature is saved again when seen)", dir, err)
			continue
		}
		s.seen[sig] = true
		s.known[sig] = dir
	}
	return nil
}

// recover handles a temporary directory of Save left by a kill: the old
// version of a finding moved aside whose new version never took its place
// is put back; anything else is removed.
func (s *FindingStore) recover(root, name string) {
	tmp := filepath.Join(root, name)
	if strings.HasSuffix(name, ".old") {
		if sig, err := ReadFindingSignature(tmp); err == nil {
			dir := filepath.Join(root, DirName(sig))
			if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) && os.Rename(tmp, dir) == nil {
				logf(s.Log, "findings: %s: restored (a save was cut short after moving it aside)", dir)
				return
			}
		}
	}
	os.RemoveAll(tmp)
}

// Seen reports whether sig was saved before and marks it seen.
func (s *FindingStore) Seen(sig string) bool {
	if s.seen[sig] {
		return true
	}
	s.seen[sig] = true
	return false
}

// Known returns the directory of sig if it was on disk before Open
// (found by an earlier run in this workdir).
func (s *FindingStore) Known(sig string) (string, bool) {
	d, ok := s.known[sig]
	return d, ok
}

// DirName is the directory name of a signature: readable and unique.
func DirName(sig string) string {
	h := sha256.Sum256([]byte(sig))
	var b strings.Builder
	for _, c := range sig {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 60 {
			break
		}
	}
	return b.String() + "-" + hex.EncodeToString(h[:4])
}

// Save writes a finding directory and returns its path. The directory
// appears whole or not at all: it is written under a temporary name and
// renamed over any earlier version (a finding is saved once as soon as it
// is seen, and again once minimized), so a kill mid-save never leaves a
// partial finding that would count as seen.
func (s *FindingStore) Save(f *Finding) (string, error) {
	if s.Dir == "" {
		return "", nil
	}
	if s.Seal != nil {
		// Held across the write: Seal.Close waits for a save in progress.
		if !s.Seal.hold() {
			return "", ErrSealed
		}
		defer s.Seal.release()
	}
	root := filepath.Join(s.Dir, "findings")
	dir := filepath.Join(root, DirName(f.Issue.Signature))
	tmp, err := os.MkdirTemp(root, ".saving-")
	if err != nil {
		return "", fmt.Errorf("findings: %w", err)
	}
	defer os.RemoveAll(tmp)
	files := map[string][]byte{
		"signature":   []byte(f.Issue.Signature + "\n"),
		"program.ffz": f.Program.Format(),
		"seed":        []byte(seedFile(f)),
		"report.txt":  []byte(f.Report()),
		"replay":      []byte(f.Replay() + "\n"),
	}
	if f.Minimized != nil {
		files["minimized.ffz"] = f.Minimized.Format()
	}
	if f.MinDropped != nil {
		files["minimized-dropped.ffz"] = f.MinDropped.Format()
	}
	if c, err := reproc.ForFinding(f.Minimized, f.Program, f.MinObs, f.Observation); err == nil {
		files["repro.c"] = c
	}
	for name, o := range map[string]*obs.Observation{"observation.json": f.Observation, "minimized-observation.json": f.MinObs} {
		if o == nil {
			continue
		}
		b, err := json.MarshalIndent(o, "", " ")
		if err != nil {
			return "", fmt.Errorf("findings: %s: %w", name, err)
		}
		files[name] = b
	}
	for name, text := range f.Issue.Files {
		files[name] = []byte(text)
	}
	if s.Pages != nil {
		for name, b := range s.Pages(f) {
			files[name] = b
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return "", fmt.Errorf("findings: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("findings: %w", err)
	}
	if err := replaceDir(tmp, dir); err != nil {
		return "", fmt.Errorf("findings: %w", err)
	}
	return dir, nil
}

// replaceDir puts directory tmp in dir's place. An earlier dir is swapped
// out atomically (renameat2 RENAME_EXCHANGE) and left in tmp; where the
// filesystem cannot exchange, it is moved aside to tmp.old first (Open
// puts it back if a kill comes before the second rename).
func replaceDir(tmp, dir string) error {
	if _, err := os.Lstat(dir); err != nil {
		return os.Rename(tmp, dir)
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return &os.LinkError{Op: "exchange", Old: tmp, New: dir, Err: err}
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	defer os.RemoveAll(old)
	return os.Rename(tmp, dir)
}

// Report is the human-readable report of a finding.
func (f *Finding) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "forkfuzz finding: %s\n", f.Issue.Signature)
	fmt.Fprintf(&b, "oracle:   %s\n", f.Issue.Oracle)
	if f.Target == "native" {
		fmt.Fprintf(&b, "target:   native (host kernel: %s)\n", kernelRelease())
	} else {
		fmt.Fprintf(&b, "target:   %s\n", f.Target)
	}
	fmt.Fprintf(&b, "kernel:   %s\n", f.Kernel)
	if f.Version != "" {
		fmt.Fprintf(&b, "version:  %s\n", f.Version)
	}
	fmt.Fprintf(&b, "seed:     campaign %d, program %d, program seed %d\n", f.CampaignSeed, f.Index, f.ProgramSeed)
	if f.Origin != "" {
		fmt.Fprintf(&b, "drawn:    %s\n", f.Origin)
	}
	if f.Corrupt != "" {
		fmt.Fprintf(&b, "NOTE:     the executor ran with the test-only corruption %q\n", f.Corrupt)
	}
	if f.Judged != "" {
		fmt.Fprintf(&b, "judged:   %s\n", f.Judged)
	}
	if f.NoCover {
		b.WriteString("kcov:     off in the run that showed it and in its minimization and replays (a blind campaign collects coverage for some programs only)\n")
	}
	if f.NoCensus {
		b.WriteString("census:   no page census at forks in the run that showed it, nor in its minimization and replays (campaigns take it for some programs only)\n")
	}
	switch {
	case f.Minimized == nil:
		b.WriteString("minimized: not yet (saved as soon as seen; minimization follows)\n")
	case f.NotRepeated:
		budget := ""
		if f.MinRuns < flakyReruns && !f.Interrupted {
			budget = fmt.Sprintf(" (the minimization budget allowed %d of %d)", f.MinRuns, flakyReruns)
		}
		fmt.Fprintf(&b, "minimized: no, the program did not fail again on %d reruns%s%s; reproduced %d/%d replays\n",
			f.MinRuns, budget, map[bool]string{true: " (then interrupted)"}[f.Interrupted], f.Reproduced, f.Replays)
	case f.MinDropped != nil:
		fmt.Fprintf(&b, "minimized: no: the minimized program (%d ops, in %d target runs; minimized-dropped.ffz) reproduced 0/%d replays, so the original is kept; reproduced %d/%d replays\n",
			len(f.MinDropped.Ops), f.MinRuns, f.MinDroppedReplays, f.Reproduced, f.Replays)
	case f.Interrupted:
		fmt.Fprintf(&b, "minimized: %d ops (from %d) in %d target runs%s, then interrupted; reproduced %d/%d replays\n",
			len(f.Minimized.Ops), len(f.Program.Ops), f.MinRuns, f.triesNote(), f.Reproduced, f.Replays)
	default:
		fmt.Fprintf(&b, "minimized: %d ops (from %d) in %d target runs%s; reproduced %d/%d replays\n",
			len(f.Minimized.Ops), len(f.Program.Ops), f.MinRuns, f.triesNote(), f.Reproduced, f.Replays)
	}
	if f.ReplayErrors > 0 {
		fmt.Fprintf(&b, "          (%d more replay runs gave no verdict: refused at the end of the budget, or harness errors)\n", f.ReplayErrors)
	}
	if f.AimNote != "" {
		fmt.Fprintf(&b, "aimed:    %s (%d runs; a fork's K-th failure point moves with the executor's own mappings)\n", f.AimNote, f.AimRuns)
	}
	if n := f.ReplayRunsNote(); n != "" {
		fmt.Fprintf(&b, "replays:  %s\n", n)
	}
	fmt.Fprintf(&b, "replay:   %s\n", f.Replay())
	b.WriteString("          (in this directory; exit status 1 and the signature above when it reproduces)\n")
	b.WriteString("\n")
	if f.Minimized != nil && f.MinObs != nil {
		fmt.Fprintf(&b, "What went wrong (minimized program):\n%s\n\nMinimized program:\n%s\n", indent(f.MinIssue.Explanation), indent(string(f.Minimized.Format())))
	}
	fmt.Fprintf(&b, "What went wrong (original program):\n%s\n\nOriginal program:\n%s", indent(f.Issue.Explanation), indent(string(f.Program.Format())))
	return b.String()
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ")
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown kernel"
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}

// Exists reports whether the directory of sig is on disk and complete
// (FindingCore).
func (s *FindingStore) Exists(sig string) bool {
	if s.Dir == "" {
		return false
	}
	got, err := ReadFindingSignature(filepath.Join(s.Dir, "findings", DirName(sig)))
	return err == nil && got == sig
}

// seedFile is a finding's seed file: the campaign's seed, the program's
// index and seed, how it was drawn when not from ProgramRand(campaign
// seed, index), "kcov off" when its run collected no kernel coverage and
// "census off" when it took no page census at forks (its replays run the
// same way).
func seedFile(f *Finding) string {
	s := fmt.Sprintf("campaign-seed %d\nprogram-index %d\nprogram-seed %d\n", f.CampaignSeed, f.Index, f.ProgramSeed)
	if f.Origin != "" {
		s += "drawn " + f.Origin + "\n"
	}
	if f.NoCover {
		s += "kcov off\n"
	}
	if f.NoCensus {
		s += "census off\n"
	}
	return s
}

// ReadSeed takes in a finding's seed file (seedFile): the campaign seed,
// the program's index and seed, how it was drawn, and whether its run
// collected kernel coverage and took the page census.
func (f *Finding) ReadSeed(b []byte) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		v = strings.TrimSpace(v)
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "campaign-seed":
			f.CampaignSeed = n
		case "program-index":
			f.Index = int64(n)
		case "program-seed":
			f.ProgramSeed = n
		case "drawn":
			f.Origin = v
		case "kcov":
			f.NoCover = v == "off"
		case "census":
			f.NoCensus = v == "off"
		}
	}
}
