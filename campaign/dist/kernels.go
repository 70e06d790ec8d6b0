package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forkfuzz/forkfuzz/kernel"
	"github.com/nats-io/nats.go/jetstream"
)

// PutKernel publishes a kernel image to the object store once, named by
// its SHA-256, and returns the hash.
func PutKernel(ctx context.Context, s *Store, path string) (string, error) {
	sum, err := kernel.FileSHA256(path)
	if err != nil {
		return "", fmt.Errorf("dist: kernel %s: %w", path, err)
	}
	if _, err := s.Kernels.GetInfo(ctx, sum); err == nil {
		return sum, nil // published before
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", fmt.Errorf("dist: kernel %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("dist: kernel %s: %w", path, err)
	}
	defer f.Close()
	if _, err := s.Kernels.Put(ctx, jetstream.ObjectMeta{Name: sum, Description: filepath.Base(path)}, f); err != nil {
		return "", fmt.Errorf("dist: publishing kernel %s: %w", path, err)
	}
	return sum, nil
}

// FetchKernel returns the path of the image with SHA-256 sum under cache,
// fetching it from the object store if it is not there yet, and checks
// the hash of what it fetched.
func FetchKernel(ctx context.Context, s *Store, sum, cache string) (string, error) {
	path := filepath.Join(cache, "kernels", sum)
	if got, err := kernel.FileSHA256(path); err == nil && got == sum {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("dist: kernel cache: %w", err)
	}
	tmp := path + ".part"
	if err := s.Kernels.GetFile(ctx, sum, tmp); err != nil {
		return "", fmt.Errorf("dist: fetching kernel %s: %w", sum, err)
	}
	got, err := kernel.FileSHA256(tmp)
	if err != nil {
		return "", fmt.Errorf("dist: kernel %s: %w", sum, err)
	}
	if got != sum {
		os.Remove(tmp)
		return "", fmt.Errorf("dist: kernel %s: fetched content hashes to %s", sum, got)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("dist: kernel cache: %w", err)
	}
	return path, nil
}

// CampaignKernel is the kernel of the newest unfinished qemu campaign (""
// when there is none). Only a missing campaign means ""; a store that
// cannot be read is an error, so an agent does not boot the default
// kernel instead of the campaign's.
func CampaignKernel(ctx context.Context, st *Store) (string, error) {
	keys, err := st.State.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) || errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil // no campaign yet
	} else if err != nil {
		return "", fmt.Errorf("campaign state: %w", err)
	}
	var best State
	for _, k := range keys {
		e, err := st.State.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since it was listed
		} else if err != nil {
			return "", fmt.Errorf("campaign state %s: %w", k, err)
		}
		var s State
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			return "", fmt.Errorf("campaign state %s: %w", k, err)
		}
		if s.Target != "qemu" || s.Finished || s.Kernel == "" {
			continue
		}
		if s.Updated.After(best.Updated) {
			best = s
		}
	}
	return best.Kernel, nil
}
