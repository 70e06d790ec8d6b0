package checker

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRelease reads the major and minor version of a kernel release as
// uname -r prints it: MAJOR.MINOR, any further .NUMBER parts, then
// nothing or a suffix starting with '-', '+', '_' or '~' ("6.1.192",
// "6.1.0-28-cloud-amd64", "6.18", "6.8.0-rc3", "6.1.0+",
// "5.15.133.1-microsoft-standard-WSL2"). It is the strict form for a
// release a user typed: the model (kernelBefore) reads the same two
// numbers from anything that starts with them and follows the newest
// behaviour it knows for anything else, so "v6.1.192" would silently get
// 6.18's rules.
func ParseRelease(rel string) (major, minor int, err error) {
	// Anything goes after the separator: Debian's ABI and flavour, -rcN,
	// a LOCALVERSION.
	ver := rel
	if i := strings.IndexAny(rel, "-+_~"); i >= 0 {
		ver = rel[:i]
	}
	parts := strings.Split(ver, ".")
	if len(parts) < 2 {
		return 0, 0, badRelease(rel)
	}
	nums := make([]int, len(parts))
	for i, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return 0, 0, badRelease(rel)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0, 0, badRelease(rel)
		}
		nums[i] = n
	}
	return nums[0], nums[1], nil
}

func badRelease(rel string) error {
	return fmt.Errorf("%q is not a kernel release: want uname -r's form, e.g. 6.1.192 or 6.1.0-28-cloud-amd64", rel)
}
