package checker

import "testing"

func TestParseRelease(t *testing.T) {
	for _, c := range []struct {
		rel          string
		major, minor int
		ok           bool
	}{
		{"6.1.192", 6, 1, true},
		{"6.1.0-28-cloud-amd64", 6, 1, true},
		{"6.18", 6, 18, true},
		{"6.18.0", 6, 18, true},
		{"6.8.0-rc3", 6, 8, true},
		{"6.1.0+", 6, 1, true},
		{"5.15.133.1-microsoft-standard-WSL2", 5, 15, true},
		{"6.7.4-200.fc39.x86_64", 6, 7, true},
		{"4.19.0_custom", 4, 19, true},
		{"", 0, 0, false},
		{"v6.1.192", 0, 0, false},
		{"garbage", 0, 0, false},
		{"6", 0, 0, false},
		{"6.", 0, 0, false},
		{".1", 0, 0, false},
		{"6.x", 0, 0, false},
		{"6.1.", 0, 0, false},
		{"6.1x", 0, 0, false},
		{"6..1", 0, 0, false},
		{" 6.1", 0, 0, false},
		{"-6.1", 0, 0, false},
		{"6.1 ", 0, 0, false},
		{"99999999999999999999.1", 0, 0, false},
	} {
		major, minor, err := ParseRelease(c.rel)
		if (err == nil) != c.ok || major != c.major || minor != c.minor {
			t.Errorf("ParseRelease(%q) = %d, %d, %v; want %d, %d, ok %v", c.rel, major, minor, err, c.major, c.minor, c.ok)
		}
	}
}
