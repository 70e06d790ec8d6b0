package vm

import (
	"errors"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

// The executor's refusal (no free hugetlb pages) crosses the VM boundary
// as text; errors.Is finds it again on the host side, and only it.
func TestGuestErrorUnwraps(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"executor: map hugetlb-private region r0 (2 MiB): cannot allocate memory: " + executor.ErrNoHugetlb.Error(), true},
		{"executor: map anon-private region r0: cannot allocate memory", false},
	} {
		err := &guestError{msg: "vm 0: " + tc.msg, is: guestSentinel(tc.msg)}
		if got := errors.Is(err, executor.ErrNoHugetlb); got != tc.want {
			t.Errorf("%q: errors.Is(ErrNoHugetlb) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
