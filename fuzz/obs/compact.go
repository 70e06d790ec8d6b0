package obs

// Views carry every non-zero word and every non-zero page's digest: most
// of an observation's bytes (a program's views reach megabytes). Both
// lists are written packed (packed.go) without reflection. Two older
// forms are still read: flat arrays of numbers, 3 or 4 per entry, and
// lists of objects ({"region":..,"off":..,"value":..}).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Words is a view's non-zero words; JSON [region, off, value, ...].
type Words []Word

// PageDigests is a view's non-zero pages; JSON [region, page, digest,
// nonzero, ...].
type PageDigests []PageDigest

// MarshalJSON writes ws packed (packed.go): region, off, value.
func (ws Words) MarshalJSON() ([]byte, error) {
	if len(ws) == 0 {
		return []byte("[]"), nil
	}
	return appendPacked(make([]byte, 0, 16+len(ws)*6), len(ws), 3, func(i int, f *[maxFields]uint64) {
		w := &ws[i]
		f[0], f[1], f[2] = uint64(int64(w.Region)), w.Off, w.Value
	}), nil
}

// UnmarshalJSON reads the packed form, a flat array or a list of objects.
func (ws *Words) UnmarshalJSON(b []byte) error {
	if isPacked(b) {
		out := Words{}
		err := readPacked(b, 3, func(f *[maxFields]uint64) error {
			r, err := packedInt(f[0])
			if err != nil {
				return fmt.Errorf("region: %w", err)
			}
			out = append(out, Word{Region: r, Off: f[1], Value: f[2]})
			return nil
		})
		if err != nil {
			return fmt.Errorf("words: %w", err)
		}
		*ws = out
		return nil
	}
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

// MarshalJSON writes ps packed (packed.go): region, page, digest,
// nonzero.
func (ps PageDigests) MarshalJSON() ([]byte, error) {
	if len(ps) == 0 {
		return []byte("[]"), nil
	}
	return appendPacked(make([]byte, 0, 16+len(ps)*16), len(ps), 4, func(i int, f *[maxFields]uint64) {
		p := &ps[i]
		f[0], f[1], f[2], f[3] = uint64(int64(p.Region)), uint64(int64(p.Page)), p.Digest, uint64(int64(p.NonZero))
	}), nil
}

// UnmarshalJSON reads the packed form, a flat array or a list of objects.
func (ps *PageDigests) UnmarshalJSON(b []byte) error {
	if isPacked(b) {
		out := PageDigests{}
		err := readPacked(b, 4, func(f *[maxFields]uint64) error {
			n, err := packedInts(f, 0, 1, 3)
			if err != nil {
				return err
			}
			out = append(out, PageDigest{Region: n[0], Page: n[1], Digest: f[2], NonZero: n[2]})
			return nil
		})
		if err != nil {
			return fmt.Errorf("pages: %w", err)
		}
		*ps = out
		return nil
	}
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
