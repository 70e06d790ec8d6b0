package executor

import (
	"errors"
	"testing"
)

// A refusal (no free hugetlb pages, no file system) crosses the plugin
// and VM boundaries as text; errors.Is finds it again on the host side,
// and only it. (The native target's plugin lost it: a host without huge
// pages made every hugetlb program a harness error.)
func TestFromTextUnwraps(t *testing.T) {
	for _, tc := range []struct {
		msg      string
		hugetlb  bool
		fileSyst bool
	}{
		{"executor: map hugetlb-private region r0 (2 MiB): cannot allocate memory: " + ErrNoHugetlb.Error(), true, false},
		{"executor: region r1 ext4-private: " + ErrNoFileSystem.Error(), false, true},
		{"executor: map anon-private region r0: cannot allocate memory", false, false},
	} {
		err := FromText("vm 0: ", tc.msg)
		if got := errors.Is(err, ErrNoHugetlb); got != tc.hugetlb {
			t.Errorf("%q: errors.Is(ErrNoHugetlb) = %v, want %v", tc.msg, got, tc.hugetlb)
		}
		if got := errors.Is(err, ErrNoFileSystem); got != tc.fileSyst {
			t.Errorf("%q: errors.Is(ErrNoFileSystem) = %v, want %v", tc.msg, got, tc.fileSyst)
		}
		if err.Error() != "vm 0: "+tc.msg {
			t.Errorf("message %q", err.Error())
		}
	}
}
