package obs

// Views carry every non-zero word and every non-zero page's digest: most
// of an observation's bytes (a program's views reach megabytes). In JSON
// both lists are flat arrays of numbers, 3 or 4 per entry, written and
// read without reflection: half the bytes of one object per entry, and a
// fraction of encoding/json's time in a slow guest. The object forms
// ({"region":..,"off":..,"value":..}) are still read (older files).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Words is a view's non-zero words; JSON [region, off, value, ...].
type Words []Word

// PageDigests is a view's non-zero pages; JSON [region, page, digest,
// nonzero, ...].
type PageDigests []PageDigest

// MarshalJSON writes ws as a flat array.
func (ws Words) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(ws)*32)
	b = append(b, '[')
	for i, w := range ws {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(w.Region), 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, w.Off, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, w.Value, 10)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a flat array or a list of objects.
func (ws *Words) UnmarshalJSON(b []byte) error {
	if isObjects(b) {
		return json.Unmarshal(b, (*[]Word)(ws))
	}
	nums, err := flatNumbers(b, 3)
	if err != nil {
		return fmt.Errorf("words: %w", err)
	}
	out := make(Words, 0, len(nums)/3)
	for i := 0; i < len(nums); i += 3 {
		r, err := smallInt(nums[i])
		if err == nil && (nums[i+1].neg || nums[i+2].neg) {
			err = errors.New("negative offset or value")
		}
		if err != nil {
			return fmt.Errorf("words: entry %d: %w", i/3, err)
		}
		out = append(out, Word{Region: r, Off: nums[i+1].u, Value: nums[i+2].u})
	}
	*ws = out
	return nil
}

// MarshalJSON writes ps as a flat array.
func (ps PageDigests) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(ps)*32)
	b = append(b, '[')
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p.Region), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(p.Page), 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, p.Digest, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(p.NonZero), 10)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a flat array or a list of objects.
func (ps *PageDigests) UnmarshalJSON(b []byte) error {
	if isObjects(b) {
		return json.Unmarshal(b, (*[]PageDigest)(ps))
	}
	nums, err := flatNumbers(b, 4)
	if err != nil {
		return fmt.Errorf("pages: %w", err)
	}
	out := make(PageDigests, 0, len(nums)/4)
	for i := 0; i < len(nums); i += 4 {
		if nums[i+2].neg {
			return fmt.Errorf("pages: entry %d: negative digest", i/4)
		}
		var ints [3]int
		for k, j := range []int{i, i + 1, i + 3} {
			if ints[k], err = smallInt(nums[j]); err != nil {
				return fmt.Errorf("pages: entry %d: %w", i/4, err)
			}
		}
		out = append(out, PageDigest{Region: ints[0], Page: ints[1], Digest: nums[i+2].u, NonZero: ints[2]})
	}
	*ps = out
	return nil
}

// isObjects reports whether b is an array whose first element is an
// object (the older form).
func isObjects(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return false
	}
	b = bytes.TrimLeft(b[1:], " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// number is one integer of a flat array: its value, and whether it was
// negative (then u holds its magnitude).
type number struct {
	u   uint64
	neg bool
}

// smallInt is n as an int in [-2^31, 2^31).
func smallInt(n number) (int, error) {
	if n.u > 1<<31 || !n.neg && n.u == 1<<31 {
		return 0, fmt.Errorf("%d out of range", n.u)
	}
	if n.neg {
		return -int(n.u), nil
	}
	return int(n.u), nil
}

// flatNumbers parses a JSON array of integers (or null) whose length is
// a multiple of per.
func flatNumbers(b []byte, per int) ([]number, error) {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil, nil
	}
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, errors.New("want an array of integers")
	}
	b = b[1 : len(b)-1]
	var out []number
	for i := 0; ; {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) {
			if len(out) > 0 {
				return nil, errors.New("trailing comma")
			}
			break
		}
		var n number
		if b[i] == '-' {
			n.neg = true
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := uint64(b[i] - '0')
			if n.u > (1<<64-1-d)/10 {
				return nil, fmt.Errorf("number %d out of range", len(out))
			}
			n.u = n.u*10 + d
			i++
		}
		if i == start {
			return nil, fmt.Errorf("element %d is not an integer", len(out))
		}
		out = append(out, n)
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) {
			break
		}
		if b[i] != ',' {
			return nil, fmt.Errorf("unexpected %q after element %d", b[i], len(out)-1)
		}
		i++
	}
	if len(out)%per != 0 {
		return nil, fmt.Errorf("%d numbers, not a multiple of %d", len(out), per)
	}
	return out, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
