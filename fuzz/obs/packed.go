package obs

// The packed form of the long lists of an observation (views' words and
// page digests, threads' timed stores): a JSON string holding base64
// (standard, padded) of a version byte and then, entry after entry, each
// field's difference from the same field of the previous entry (the
// first entry's from zero) as a signed varint (encoding/binary's
// AppendVarint). Neighbouring entries differ little (a store's slots are
// 8 bytes apart and its values 1 apart; timestamps grow), so a word takes
// about 4 characters where a flat JSON array took 30 and an object 60:
// less to encode in a slow guest, to move over its console and to read.
// The flat arrays and the objects of older files are still read.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// packedVersion is the first byte of every packed list.
const packedVersion = 1

// maxFields is the most fields an entry of a packed list has.
const maxFields = 5

// isPacked reports whether b (a JSON value) is a string: the packed form.
func isPacked(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '"'
}

// appendPacked appends n entries of per fields each (get fills entry i)
// in the packed form, quotes included.
func appendPacked(out []byte, n, per int, get func(i int, f *[maxFields]uint64)) []byte {
	raw := make([]byte, 1, 1+n*per*2)
	raw[0] = packedVersion
	var prev, cur [maxFields]uint64
	for i := 0; i < n; i++ {
		get(i, &cur)
		for k := 0; k < per; k++ {
			raw = binary.AppendVarint(raw, int64(cur[k]-prev[k]))
		}
		prev = cur
	}
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, raw)
	return append(out, '"')
}

// readPacked decodes the packed form b (a JSON string) of entries of per
// fields, calling put with each entry in turn; an error names the entry.
func readPacked(b []byte, per int, put func(f *[maxFields]uint64) error) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("packed list: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("packed list: %w", err)
	}
	if len(raw) == 0 {
		return errors.New("packed list: empty (no version byte)")
	}
	if raw[0] != packedVersion {
		return fmt.Errorf("packed list: version %d, want %d", raw[0], packedVersion)
	}
	var cur [maxFields]uint64
	for i, entry := 1, 0; i < len(raw); entry++ {
		for k := 0; k < per; k++ {
			d, n := binary.Varint(raw[i:])
			if n <= 0 {
				return fmt.Errorf("packed list: entry %d, field %d: truncated or overlong varint", entry, k)
			}
			cur[k] += uint64(d)
			i += n
		}
		if err := put(&cur); err != nil {
			return fmt.Errorf("packed list: entry %d: %w", entry, err)
		}
	}
	return nil
}

// packedInt is field u of a packed entry as an int in [-2^31, 2^31).
func packedInt(u uint64) (int, error) {
	v := int64(u)
	if v < -1<<31 || v >= 1<<31 {
		return 0, fmt.Errorf("%d out of range", v)
	}
	return int(v), nil
}

// packedInts converts fields idx of f with packedInt.
func packedInts(f *[maxFields]uint64, idx ...int) ([maxFields]int, error) {
	var out [maxFields]int
	for j, k := range idx {
		v, err := packedInt(f[k])
		if err != nil {
			return out, fmt.Errorf("field %d: %w", k, err)
		}
		out[j] = v
	}
	return out, nil
}

// TimedStores is a thread's timed stores; JSON in the packed form
// (op, slot, value, inv, resp).
type TimedStores []TimedStore

// MarshalJSON writes ts packed.
func (ts TimedStores) MarshalJSON() ([]byte, error) {
	if len(ts) == 0 {
		return []byte("[]"), nil
	}
	return appendPacked(make([]byte, 0, 16+len(ts)*16), len(ts), 5, func(i int, f *[maxFields]uint64) {
		s := &ts[i]
		*f = [maxFields]uint64{uint64(int64(s.Op)), uint64(int64(s.Slot)), s.Value, s.Inv, s.Resp}
	}), nil
}

// UnmarshalJSON reads the packed form or a list of objects.
func (ts *TimedStores) UnmarshalJSON(b []byte) error {
	if !isPacked(b) {
		var out []TimedStore
		if err := json.Unmarshal(b, &out); err != nil {
			return err
		}
		*ts = out
		return nil
	}
	out := TimedStores{}
	err := readPacked(b, 5, func(f *[maxFields]uint64) error {
		n, err := packedInts(f, 0, 1)
		if err != nil {
			return err
		}
		out = append(out, TimedStore{Op: n[0], Slot: n[1], Value: f[2], Inv: f[3], Resp: f[4]})
		return nil
	})
	if err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	*ts = out
	return nil
}
