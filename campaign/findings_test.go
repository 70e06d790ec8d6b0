package campaign

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// What Open makes of the finding directories it finds: only complete ones
// count as saved; an incomplete one is logged and does not keep its
// signature from being saved again; Save's leftovers are cleaned up or,
// for an old version moved aside by a save a kill cut short, restored.
func TestFindingStoreOpen(t *testing.T) {
	const sig = "executor-crash"
	name := DirName(sig)
	for _, c := range []struct {
		name      string
		setup     func(t *testing.T, root string, save func() string)
		known     bool
		logs      string // "" : nothing logged
		leftovers []string
	}{
		{name: "complete", setup: func(t *testing.T, root string, save func() string) { save() }, known: true},
		{name: "only signature", setup: func(t *testing.T, root string, save func() string) {
			write(t, filepath.Join(root, name, "signature"), sig+"\n")
		}, logs: "program.ffz: no such file"},
		{name: "no report", setup: func(t *testing.T, root string, save func() string) {
			d := save()
			os.Remove(filepath.Join(d, "report.txt"))
		}, logs: "report.txt: no such file"},
		{name: "empty signature", setup: func(t *testing.T, root string, save func() string) {
			d := save()
			write(t, filepath.Join(d, "signature"), "\n")
		}, logs: "signature is empty"},
		{name: "signature is a FIFO", setup: func(t *testing.T, root string, save func() string) {
			d := save()
			os.Remove(filepath.Join(d, "signature"))
			if err := syscall.Mkfifo(filepath.Join(d, "signature"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, logs: "signature is a FIFO, want a regular file"},
		{name: "a half-written save is removed", setup: func(t *testing.T, root string, save func() string) {
			write(t, filepath.Join(root, ".saving-123", "signature"), sig+"\n")
		}},
		{name: "an old version moved aside is restored", setup: func(t *testing.T, root string, save func() string) {
			d := save()
			if err := os.Rename(d, filepath.Join(root, ".saving-123.old")); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(root, ".saving-123", "signature"), sig+"\n") // the new one, cut short
		}, known: true, logs: "restored"},
		{name: "an old version beside a complete new one is removed", setup: func(t *testing.T, root string, save func() string) {
			d := save()
			if err := os.CopyFS(filepath.Join(root, ".saving-123.old"), os.DirFS(d)); err != nil {
				t.Fatal(err)
			}
		}, known: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			wd := t.TempDir()
			root := filepath.Join(wd, "findings")
			first := &FindingStore{Dir: wd}
			if err := first.Open(); err != nil {
				t.Fatal(err)
			}
			c.setup(t, root, func() string {
				d, err := first.Save(crashFinding(t))
				if err != nil {
					t.Fatal(err)
				}
				return d
			})
			var log bytes.Buffer
			s := &FindingStore{Dir: wd, Log: &log}
			if err := s.Open(); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Known(sig); ok != c.known || s.Exists(sig) != c.known {
				t.Fatalf("known %v, exists %v, want %v (log: %s)", ok, s.Exists(sig), c.known, log.String())
			}
			if c.logs == "" && log.Len() > 0 || !strings.Contains(log.String(), c.logs) {
				t.Fatalf("log %q, want it to say %q", log.String(), c.logs)
			}
			if !c.known && c.logs != "" && (len(s.Incomplete) != 1 || s.Incomplete[0] != filepath.Join(root, name)) {
				t.Fatalf("Incomplete %v", s.Incomplete)
			}
			if ents, _ := os.ReadDir(root); len(ents) > 1 || len(ents) == 1 && ents[0].Name() != name {
				t.Fatalf("left in findings/: %v", ents)
			}
			// Not known: the signature is new again and saved whole.
			if s.Seen(sig) != c.known {
				t.Fatalf("Seen = %v", !c.known)
			}
			if !c.known {
				d, err := s.Save(crashFinding(t))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ReadFindingSignature(d); err != nil {
					t.Fatalf("saved again: %v", err)
				}
			}
		})
	}
}

// A second Save of a signature replaces the first version whole and
// leaves no temporary directory.
func TestFindingStoreSaveReplaces(t *testing.T) {
	wd := t.TempDir()
	s := &FindingStore{Dir: wd}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	f := crashFinding(t)
	d, err := s.Save(f)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(d, "stale-extra"), "from the first version")
	f.Minimized = f.Program
	f.Reproduced, f.Replays = 5, 5
	if d2, err := s.Save(f); err != nil || d2 != d {
		t.Fatalf("second save: %s, %v", d2, err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "report.txt")); !strings.Contains(string(b), "reproduced 5/5") {
		t.Fatalf("report not replaced:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(d, "stale-extra")); err == nil {
		t.Fatal("a file of the first version survived")
	}
	if ents, _ := os.ReadDir(filepath.Join(wd, "findings")); len(ents) != 1 {
		t.Fatalf("findings/ holds %v", ents)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
