package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
)

var (
	reTarget = regexp.MustCompile(`(?m)^target:\s+(\S+)`)
	reOracle = regexp.MustCompile(`(?m)^oracle:\s+(\S+)`)
	reJudged = regexp.MustCompile(`(?m)^judged:\s+(.*)$`)
	// The replays counted are the last on the line (a dropped minimized
	// program's come first); the runs, the first "N target runs".
	reMinimized = regexp.MustCompile(`(?m)^minimized: .*?(\d+) target runs.*reproduced (\d+)/(\d+) replays$`)
	reCorrupt   = regexp.MustCompile(`(?m)^NOTE:.*corruption "([^"]*)"`)
	reWhat      = regexp.MustCompile(`(?s)What went wrong \((minimized|original) program\):\n(.*?)\n\n`)
)

// Size limits of the files of a finding directory: a program of
// prog.MaxOps operations is well under 1 MiB of text; observations run to
// tens of MiB.
const (
	maxSmallFile       = 64 << 10  // signature, seed
	maxProgramFile     = 16 << 20  // program.ffz, minimized.ffz
	maxObservationFile = 256 << 20 // observation.json, minimized-observation.json
	maxOtherFile       = 64 << 20  // report.txt, report.json, attachments
)

// fileLimit is the size limit of a finding directory's file.
func fileLimit(name string) int64 {
	switch {
	case name == "signature" || name == "seed":
		return maxSmallFile
	case strings.HasSuffix(name, ".ffz"):
		return maxProgramFile
	case strings.HasSuffix(name, "observation.json"):
		return maxObservationFile
	}
	return maxOtherFile
}

// readFindingFile reads a file of a finding directory, bounded
// (fileLimit); anything but a regular file is an error.
func readFindingFile(dir, name string) ([]byte, error) {
	return fsutil.ReadFileLimited(filepath.Join(dir, name), fileLimit(name))
}

// LoadFinding reads a finding directory back into a campaign.Finding (as
// far as the directory keeps it: the issue's evidence is recomputed from
// the program and observation when a page is drawn).
func LoadFinding(dir string) (*campaign.Finding, error) {
	read := func(name string) ([]byte, error) { return readFindingFile(dir, name) }
	sig, err := read("signature")
	if err != nil {
		return nil, err
	}
	f := &campaign.Finding{Issue: judge.Issue{Signature: strings.TrimSpace(string(sig))}}
	if err := loadPrograms(dir, f); err != nil {
		return nil, err
	}
	if b, err := read("seed"); err == nil {
		f.ReadSeed(b)
	}
	rep, _ := read("report.txt")
	loadReport(dir, f, string(rep))
	loadAttachments(dir, f)
	return f, nil
}

// loadPrograms reads the program, the minimized one and their
// observations.
func loadPrograms(dir string, f *campaign.Finding) error {
	pb, err := readFindingFile(dir, "program.ffz")
	if err != nil {
		return err
	}
	if f.Program, err = prog.Parse(pb); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "program.ffz"), err)
	}
	if b, err := readFindingFile(dir, "minimized.ffz"); err == nil {
		if f.Minimized, err = prog.Parse(b); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, "minimized.ffz"), err)
		}
	}
	loadObs := func(name string) (*obs.Observation, error) {
		b, err := readFindingFile(dir, name)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		var o obs.Observation
		if err := json.Unmarshal(b, &o); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		return &o, nil
	}
	if f.Observation, err = loadObs("observation.json"); err != nil {
		return err
	}
	f.MinObs, err = loadObs("minimized-observation.json")
	return err
}

// loadReport takes in report.txt (txt) and report.json: the target, the
// oracle, the verdict, the minimization and the explanations.
func loadReport(dir string, f *campaign.Finding, txt string) {
	if m := reTarget.FindStringSubmatch(txt); m != nil {
		f.Target = m[1]
	}
	if m := reOracle.FindStringSubmatch(txt); m != nil {
		f.Issue.Oracle = checker.Oracle(m[1])
	} else {
		f.Issue.Oracle = oracle.FromSignature(f.Issue.Signature)
	}
	if m := reJudged.FindStringSubmatch(txt); m != nil {
		f.Judged = m[1]
	}
	if m := reMinimized.FindStringSubmatch(txt); m != nil {
		f.MinRuns, _ = strconv.Atoi(m[1])
		f.Reproduced, _ = strconv.Atoi(m[2])
		f.Replays, _ = strconv.Atoi(m[3])
	}
	if m := reCorrupt.FindStringSubmatch(txt); m != nil {
		f.Corrupt = m[1]
	}
	// The target's flags and the kernel's identity: report.json keeps
	// them; a directory saved before it did has them in report.txt's
	// replay line only.
	var meta Meta
	if b, err := readFindingFile(dir, FindingJSON); err == nil && json.Unmarshal(b, &meta) == nil {
		f.TargetArgs = meta.TargetArgs
		if meta.KernelID != nil {
			f.Kernel = *meta.KernelID
		}
		for _, r := range meta.ReplayRuns {
			f.ReplayRuns = append(f.ReplayRuns, campaign.ReplayRun{Outcome: r.Outcome, Took: time.Duration(r.Seconds * float64(time.Second))})
		}
	}
	if f.TargetArgs == nil {
		if m := reReplay.FindStringSubmatch(txt); m != nil {
			f.TargetArgs = replayTargetArgs(m[1])
		}
	}
	for _, m := range reWhat.FindAllStringSubmatch(txt+"\n\n", -1) {
		expl := unindent(m[2])
		if m[1] == "minimized" {
			f.MinIssue = judge.Issue{Oracle: f.Issue.Oracle, Signature: f.Issue.Signature, Explanation: expl}
		} else {
			f.Issue.Explanation = expl
		}
	}
}

// loadAttachments reads the files the issue added (porcupine's HTML, a
// console).
func loadAttachments(dir string, f *campaign.Finding) {
	known := map[string]bool{"signature": true, "program.ffz": true, "seed": true, "report.txt": true, "minimized.ffz": true,
		"observation.json": true, "minimized-observation.json": true, FindingHTML: true, FindingJSON: true}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() || known[e.Name()] {
			continue
		}
		b, err := readFindingFile(dir, e.Name())
		if err != nil {
			continue
		}
		if f.Issue.Files == nil {
			f.Issue.Files = map[string]string{}
		}
		f.Issue.Files[e.Name()] = string(b)
	}
}

func unindent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}

// WriteFindingPages (re)writes report.html and report.json in every
// finding directory under workdir/findings and returns how many. A
// directory that cannot be loaded or written is skipped, with a warning
// naming it; a missing findings/ is no finding. err is only for a
// findings/ that cannot be listed.
func WriteFindingPages(workdir string) (n int, warnings []string, err error) {
	root := filepath.Join(workdir, "findings")
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	} else if err != nil {
		return 0, nil, err
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if err := writeFindingPage(dir); err != nil {
			warnings = append(warnings, dirWarning(dir, "skipped", err))
			continue
		}
		n++
	}
	return n, warnings, nil
}

func writeFindingPage(dir string) error {
	f, err := LoadFinding(dir)
	if err != nil {
		return err
	}
	files := Files(f)
	if old, err := readFindingFile(dir, FindingJSON); err == nil {
		// Keep when it was first saved.
		var m Meta
		if json.Unmarshal(old, &m) == nil && !m.Saved.IsZero() {
			nm := MetaOf(f)
			nm.Saved = m.Saved
			files[FindingJSON], _ = json.MarshalIndent(nm, "", " ")
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var reReplay = regexp.MustCompile(`(?m)^replay:\s+(forkfuzz exec .*)$`)

// replayTargetArgs are the target flags of a replay command
// ("forkfuzz exec FLAGS [--corrupt C] FILE"), nil when it has none.
func replayTargetArgs(cmd string) []string {
	w := campaign.SplitCommand(cmd)
	if len(w) < 3 || w[0] != "forkfuzz" || w[1] != "exec" {
		return nil
	}
	w = w[2 : len(w)-1]
	var args []string
	for i := 0; i < len(w); i++ {
		if w[i] == "--corrupt" {
			i++
			continue
		}
		args = append(args, w[i])
	}
	return args
}
