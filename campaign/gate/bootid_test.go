package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/sim"
)

// imageSim is the simulated kernel posing as a VM target that booted an
// image it chose itself (Debian's kernel when no --kernel is given).
type imageSim struct {
	*sim.Target
	image string
}

func (s *imageSim) KernelImage() string { return s.image }
func (s *imageSim) KernelRelease() string {
	return "6.1.0-57-cloud-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3"
}

// A gate on a target that chose its kernel names that kernel (it said
// "release qemu" for Debian's kernel).
func TestGateNamesTheBootedImage(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "vmlinuz")
	os.WriteFile(img, []byte("not really a kernel"), 0o644)
	tg := &imageSim{Target: simTarget(t), image: img}
	r := Run(context.Background(), Config{Open: func() (agents.Target, error) { return tg, nil }, Kernel: KernelIdentity{Target: "qemu"},
		Budget: 6 * time.Second, Seed: 1, Workdir: filepath.Join(dir, "w"), MinPrograms: 1})
	k := r.Kernel
	if k.Image != img || k.Release != "6.1.0-57-cloud-amd64" || len(k.SHA256) != 64 || k.Version == "" {
		t.Fatalf("kernel identity %+v", k)
	}
}

// A gate run away from a forkfuzz checkout (from a kernel tree: the
// default corpus/regress and corpus/rollback are not there) replays the
// regression programs built into the binary; it replayed the seeds only.
func TestGateEmbeddedRegressions(t *testing.T) {
	dir := t.TempDir()
	r := Run(context.Background(), Config{Open: func() (agents.Target, error) { return simTarget(t), nil }, Kernel: KernelIdentity{Target: "sim-eager"},
		Budget: 8 * time.Second, Seed: 1, Workdir: filepath.Join(dir, "w"), MinPrograms: 1,
		OptionalCorpusDirs: []string{filepath.Join(dir, "corpus", "regress"), filepath.Join(dir, "corpus", "rollback")}})
	src := map[string]int{}
	for _, c := range r.Corpus {
		src[c.Source]++
	}
	if src["regress"] == 0 || src["rollback"] == 0 || src["seeds"] == 0 {
		t.Fatalf("corpus sources %v", src)
	}
	if ph := phaseOfResult(r, "replay"); ph == nil || !strings.Contains(ph.Note, "replayed the copy built into forkfuzz") {
		t.Fatalf("replay phase %+v", ph)
	}
}

func phaseOfResult(r *Result, name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}
