package checker

import (
	"strings"
	"testing"
)

// TestKernelVersionRules: observations recorded on Debian's 6.1 kernel in
// QEMU (testdata/linux61) pass, and the same observations fail when they
// claim to come from 6.18: the model follows the kernel's release where
// Linux changed behaviour (multi-VMA MREMAP_FIXED moves and the order of
// mremap's checks changed in 6.17).
func TestKernelVersionRules(t *testing.T) {
	for _, r := range loadRecorded(t, "testdata/linux61/*.ffz") {
		f, p, o := r.file, r.p, &r.o
		if !strings.HasPrefix(o.Kernel, "6.1.") {
			t.Fatalf("%s: kernel %q", f, o.Kernel)
		}
		if v := Check(p, o); !v.OK() {
			t.Errorf("%s on %s:\n%s", f, o.Kernel, v.Report())
		}
		o.Kernel = "6.18.0"
		if v := Check(p, o); v.OK() {
			t.Errorf("%s: the 6.1 behaviour passes as 6.18's too: the version rule does not bite", f)
		}
	}
}
