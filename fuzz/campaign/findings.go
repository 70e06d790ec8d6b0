package campaign

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/obs"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/fuzz/minimize"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/kernel/sim"
)

// Issue is one thing wrong with one run.
type Issue struct {
	Oracle      string `json:"oracle"`
	Signature   string `json:"signature"`
	Explanation string `json:"explanation"`
	// Files are extra files for the finding directory (e.g. the console
	// of a VM whose kernel reported).
	Files map[string]string `json:"-"`
}

// Judge turns a target's answer into issues: the oracles' findings on the
// observation, a kernel report from a VM's console, the simulated kernel's
// page-table invariants, an executor crash or hang. A harness error (the
// target could not run the program) is returned as an error and is never
// an issue.
func Judge(p *prog.Program, o *obs.Observation, runErr error) ([]Issue, error) {
	var issues []Issue
	var ce *executor.CrashError
	var kr *vm.KernelReportError
	switch {
	case errors.As(runErr, &ce):
		oracle := "executor-crash"
		if ce.Hang {
			oracle = "executor-hang"
		}
		return []Issue{{Oracle: oracle, Signature: oracle, Explanation: ce.Error()}}, nil
	case errors.As(runErr, &kr):
		files := map[string]string{"console.txt": kr.Console}
		if kr.Report != "" {
			files["kernel-report.txt"] = kr.Report
		}
		issues = append(issues, Issue{Oracle: kr.Oracle(), Signature: kr.Signature(), Explanation: kr.Explanation(), Files: files})
		if o == nil {
			return issues, nil
		}
	case runErr != nil:
		return nil, runErr
	}
	var html map[string][]byte
	// sim.Judge is checker.Check plus the page-table invariants a
	// simulated kernel reports, excusing what an injected allocation
	// failure legitimately causes; on other targets it is checker.Check.
	for _, is := range sim.Judge(p, o) {
		oracle, _, _ := strings.Cut(is.Signature, ":")
		issue := Issue{Oracle: oracle, Signature: is.Signature, Explanation: is.Text}
		if oracle == "linearizability" {
			if html == nil {
				html = checker.LinearizabilityHTML(p, o, 10*time.Second)
			}
			issue.Files = make(map[string]string)
			for name, b := range html {
				issue.Files[name] = string(b)
			}
		}
		issues = append(issues, issue)
	}
	return issues, nil
}

// HasSignature reports whether issues contain sig.
func HasSignature(issues []Issue, sig string) bool {
	for _, is := range issues {
		if is.Signature == sig {
			return true
		}
	}
	return false
}

// Finding is a saved failure.
type Finding struct {
	Issue        Issue
	Program      *prog.Program
	Observation  *obs.Observation
	Minimized    *prog.Program
	MinObs       *obs.Observation
	MinIssue     Issue // the issue as seen on the minimized program
	Target       string
	CampaignSeed uint64
	Index        int64
	ProgramSeed  uint64
	Corrupt      string
	Replays      int // runs of the minimized program after minimizing
	Reproduced   int // of which reproduced the signature
	MinRuns      int // target runs spent minimizing
}

// Reduce minimizes f.Program while the same signature reproduces on target,
// spending at most maxRuns target runs (0: 300) and, if maxTime > 0, about
// that much time, then replays the result to state its reliability.
func Reduce(target agents.Target, f *Finding, maxRuns int, maxTime time.Duration, corrupt string) {
	if maxRuns <= 0 {
		maxRuns = 300
	}
	opt := executor.Options{Corrupt: corrupt}
	sig := f.Issue.Signature
	runs := 0
	deadline := time.Now().Add(maxTime)
	reproduces := func(q *prog.Program) bool {
		if runs >= maxRuns || (maxTime > 0 && time.Now().After(deadline)) {
			return false
		}
		runs++
		o, err := target.Run(q, opt)
		issues, herr := Judge(q, o, err)
		return herr == nil && HasSignature(issues, sig)
	}
	min, _ := minimize.Minimize(f.Program, reproduces, minimize.MaxAttempts(maxRuns))
	f.Minimized, f.MinRuns = min, runs
	f.Replays = 5
	for k := 0; k < f.Replays; k++ {
		o, err := target.Run(min, opt)
		issues, herr := Judge(min, o, err)
		if herr != nil || !HasSignature(issues, sig) {
			continue
		}
		f.Reproduced++
		if f.MinObs == nil {
			f.MinObs = o
			for _, is := range issues {
				if is.Signature == sig {
					f.MinIssue = is
					break
				}
			}
		}
	}
}

// FindingStore keeps one directory per signature under Dir/findings.
type FindingStore struct {
	Dir  string
	seen map[string]bool
}

// Open creates the store and loads the signatures already saved there.
func (s *FindingStore) Open() error {
	s.seen = make(map[string]bool)
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
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "signature"))
		if err == nil {
			s.seen[strings.TrimSpace(string(b))] = true
		}
	}
	return nil
}

// Seen reports whether sig was saved before and marks it seen.
func (s *FindingStore) Seen(sig string) bool {
	if s.seen[sig] {
		return true
	}
	s.seen[sig] = true
	return false
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

// Save writes a finding directory and returns its path.
func (s *FindingStore) Save(f *Finding) (string, error) {
	if s.Dir == "" {
		return "", nil
	}
	dir := filepath.Join(s.Dir, "findings", DirName(f.Issue.Signature))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("findings: %w", err)
	}
	files := map[string][]byte{
		"signature":   []byte(f.Issue.Signature + "\n"),
		"program.ffz": f.Program.Format(),
		"seed":        []byte(fmt.Sprintf("campaign-seed %d\nprogram-index %d\nprogram-seed %d\n", f.CampaignSeed, f.Index, f.ProgramSeed)),
		"report.txt":  []byte(f.Report()),
	}
	if f.Minimized != nil {
		files["minimized.ffz"] = f.Minimized.Format()
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
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", fmt.Errorf("findings: %w", err)
		}
	}
	return dir, nil
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
	fmt.Fprintf(&b, "seed:     campaign %d, program %d, program seed %d\n", f.CampaignSeed, f.Index, f.ProgramSeed)
	if f.Corrupt != "" {
		fmt.Fprintf(&b, "NOTE:     the executor ran with the test-only corruption %q\n", f.Corrupt)
	}
	if f.Minimized != nil {
		fmt.Fprintf(&b, "minimized: %d ops (from %d) in %d target runs; reproduced %d/%d replays\n",
			len(f.Minimized.Ops), len(f.Program.Ops), f.MinRuns, f.Reproduced, f.Replays)
		fmt.Fprintf(&b, "replay:   forkfuzz exec minimized.ffz\n")
	}
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

// Exists reports whether the directory of sig is on disk.
func (s *FindingStore) Exists(sig string) bool {
	if s.Dir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(s.Dir, "findings", DirName(sig), "signature"))
	return err == nil
}
