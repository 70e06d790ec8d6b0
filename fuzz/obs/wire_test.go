package obs

import (
	"errors"
	"reflect"
	"testing"
)

func TestDecodeRoundTrip(t *testing.T) {
	e := NewEncoder()
	e.Add(RecOp, 0, 0, 1234, 10, 20, 0)
	e.Add(RecViewBegin, 1, uint64(AtStartU))
	e.Add(RecVMA, 0x1000, 0x3000, VMARead|VMAWrite, 0, 7)
	e.Add(RecRun, 0, 0, 2, uint64(Readable))
	e.Add(RecPage, 0, 1, 99, 1)
	e.Add(RecWord, 0, 0x1008, 0xabc)
	e.Add(RecViewEnd, 0)
	e.Add(RecOp, 2, 12, 0, 30, 40, 3)
	o, err := Decode(e.Buf, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := &Observation{
		Version: Version,
		Ops:     []OpResult{{Ran: true, Ret: 1234, Start: 10, End: 20}, {}, {Ran: true, Errno: 12, Start: 30, End: 40, Skipped: 3}},
		Views: []View{{Proc: 1, At: AtStart,
			VMAs:  []VMA{{Start: 0x1000, End: 0x3000, Prot: "rw-p", Inode: 7}},
			Runs:  []Run{{Region: 0, First: 0, N: 2, State: Readable}},
			Pages: []PageDigest{{Region: 0, Page: 1, Digest: 99, NonZero: 1}},
			Words: []Word{{Region: 0, Off: 0x1008, Value: 0xabc}}}},
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got %+v\nwant %+v", o, want)
	}
}

const AtStartU = ^uint64(0) // AtStart as written by a child

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs [][]uint64
	}{
		{"op out of range", [][]uint64{{RecOp, 9}}},
		{"word outside view", [][]uint64{{RecWord, 0, 8, 1}}},
		{"bad region", [][]uint64{{RecViewBegin, 0, 0}, {RecRun, 5, 0, 1, 1}}},
		{"unknown type", [][]uint64{{99}}},
		{"bad run state", [][]uint64{{RecViewBegin, 0, 0}, {RecRun, 0, 0, 1, 9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEncoder()
			for _, r := range tc.recs {
				e.Add(r[0], r[1:]...)
			}
			_, err := Decode(e.Buf, 2, 1)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want DecodeError, got %v", err)
			}
		})
	}
	if _, err := Decode([]byte{1, 2}, 1, 1); err == nil {
		t.Fatal("short buffer accepted")
	}
}

func TestUnfinishedViewIsTruncated(t *testing.T) {
	e := NewEncoder()
	e.Add(RecViewBegin, 0, 0)
	e.Add(RecRun, 0, 0, 1, uint64(Readable))
	o, err := Decode(e.Buf, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Views) != 1 || !o.Views[0].Truncated || len(o.Events) != 1 {
		t.Fatalf("unfinished view not flagged: %+v", o)
	}
}

func TestWordDigestNeverZero(t *testing.T) {
	for off := uint64(0); off < 4096; off += 8 {
		if WordDigest(off, 0) == 0 || WordDigest(off, off*31) == 0 {
			t.Fatalf("zero digest at %d", off)
		}
	}
}

func FuzzDecode(f *testing.F) {
	e := NewEncoder()
	e.Add(RecViewBegin, 0, 0)
	e.Add(RecRun, 0, 0, 1, uint64(Readable))
	e.Add(RecWord, 0, 8, 1)
	e.Add(RecViewEnd, 0)
	e.Add(RecOp, 0, 0, 1, 2, 3, 0)
	f.Add(e.Buf)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Decode(b, 4, 2)
		if err == nil && len(o.Ops) != 4 {
			t.Fatalf("decoded %d ops", len(o.Ops))
		}
	})
}
