package gate

import (
	"context"
	"os"
	"path/filepath"
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
