package obs

import (
	"encoding/binary"
	"fmt"
)

// The record stream. A report buffer is a shared memory area that every
// process of a program appends fixed-size records to; the executor decodes it
// into an Observation when the program ends. Word 0 of the buffer holds Magic,
// word 1 the number of records appended so far (updated atomically), word 2
// the capacity in records, word 3 a non-zero value if a writer ran out of room.
// Records start at byte HeaderSize; each is RecordWords little-endian uint64s,
// the first being the record type.
const (
	Magic       = 0x666b667a72656331 // "fkfzrec1"
	HeaderSize  = 64
	RecordWords = 8
	RecordSize  = RecordWords * 8
)

// Record types and their fields (after the type word).
const (
	RecOp        = 1  // op, errno, ret, start, end, skipped
	RecViewBegin = 2  // proc, at (two's complement)
	RecVMA       = 3  // start, end, prot bits, offset, inode
	RecRun       = 4  // region, first, n, state
	RecPage      = 5  // region, page, digest, nonzero
	RecWord      = 6  // region, off, value
	RecViewEnd   = 7  // truncated
	RecEvent     = 8  // code, a, b
	RecData      = 9  // op, off, value: one non-zero word an operation read (readpipe)
	RecSkip      = 10 // op, reason code (Skip*), errno
)

// VMA protection bits in RecVMA.
const (
	VMARead   = 1
	VMAWrite  = 2
	VMAExec   = 4
	VMAShared = 8
)

// Event codes in RecEvent.
const (
	EventChildFault  = 1 // a: op index; a child could not run an operation
	EventViewOverrun = 2 // a: proc; a view hit its word cap
	EventThreadFault = 3 // a: op index, b: thread; a thread's store faulted
)

// ProtString renders VMA protection bits like /proc/self/maps.
func ProtString(bits uint64) string {
	b := []byte("---p")
	if bits&VMARead != 0 {
		b[0] = 'r'
	}
	if bits&VMAWrite != 0 {
		b[1] = 'w'
	}
	if bits&VMAExec != 0 {
		b[2] = 'x'
	}
	if bits&VMAShared != 0 {
		b[3] = 's'
	}
	return string(b)
}

// DecodeError says which record of a stream is malformed.
type DecodeError struct {
	Record int
	Msg    string
}

func (e *DecodeError) Error() string { return fmt.Sprintf("report record %d: %s", e.Record, e.Msg) }

// decoder decodes a report buffer's records into o; cur is the view
// being read (nil outside one).
type decoder struct {
	o              *Observation
	cur            *View
	nops, nregions int
	// sizes[v] is how many VMAs, runs, pages and words view v's records
	// hold (viewSizes), so that each list is allocated once: a view's
	// words are up to hundreds of thousands, and growing them by
	// appending was a tenth of a program's executor time.
	sizes [][4]int
	views int
}

// viewSizes counts the VMA, run, page and word records of each view in
// the first n records of buf, in the order the views begin.
func viewSizes(buf []byte, n int) [][4]int {
	var sizes [][4]int
	in := false
	for i := 0; i < n; i++ {
		switch t := binary.LittleEndian.Uint64(buf[HeaderSize+i*RecordSize:]); t {
		case RecViewBegin:
			sizes = append(sizes, [4]int{})
			in = true
		case RecViewEnd:
			in = false
		case RecVMA, RecRun, RecPage, RecWord:
			if in {
				sizes[len(sizes)-1][t-RecVMA]++
			}
		}
	}
	return sizes
}

// Decode turns a report buffer into an observation of a program with nops
// operations and nregions regions. It never panics on malformed input.
func Decode(buf []byte, nops, nregions int) (*Observation, error) {
	if len(buf) < HeaderSize {
		return nil, &DecodeError{-1, fmt.Sprintf("buffer of %d bytes is shorter than the header", len(buf))}
	}
	le := binary.LittleEndian
	if m := le.Uint64(buf); m != Magic {
		return nil, &DecodeError{-1, fmt.Sprintf("bad magic %#x", m)}
	}
	n := le.Uint64(buf[8:])
	capacity := uint64(len(buf)-HeaderSize) / RecordSize
	d := &decoder{o: &Observation{Version: Version, Ops: make([]OpResult, nops)}, nops: nops, nregions: nregions}
	o := d.o
	if n > capacity {
		n = capacity
		o.Truncated = true
	}
	d.sizes = viewSizes(buf, int(n))
	if le.Uint64(buf[24:]) != 0 {
		o.Truncated = true
	}
	for i := 0; i < int(n); i++ {
		r := buf[HeaderSize+i*RecordSize:]
		var w [RecordWords]uint64
		for j := range w {
			w[j] = le.Uint64(r[j*8:])
		}
		if msg := d.record(w); msg != "" {
			return nil, &DecodeError{i, msg}
		}
	}
	if cur := d.cur; cur != nil {
		cur.Truncated = true
		o.Views = append(o.Views, *cur)
		e := NewEvent(EvViewUnfinished, "view of proc %d at %d was never finished", cur.Proc, cur.At)
		e.Proc = cur.Proc
		o.Events = append(o.Events, e)
	}
	return o, nil
}

// record takes in one record; a malformed one is a message.
func (d *decoder) record(w [RecordWords]uint64) string {
	o := d.o
	switch w[0] {
	case RecOp, RecData, RecSkip:
		if w[1] >= uint64(d.nops) {
			return fmt.Sprintf("op %d out of range (%d ops)", w[1], d.nops)
		}
		r := &o.Ops[w[1]]
		switch w[0] {
		case RecOp:
			r.Ran, r.Errno, r.Ret, r.Start, r.End, r.Skipped = true, int(int64(w[2])), w[3], int64(w[4]), int64(w[5]), int(w[6]&0x7fffffff)
		case RecSkip:
			r.Skip = SkipReason(w[2], w[3])
		default:
			r.Data = append(r.Data, Word{Region: -1, Off: w[2], Value: w[3]})
		}
	case RecViewBegin:
		if d.cur != nil {
			d.cur.Truncated = true
			o.Views = append(o.Views, *d.cur)
		}
		at := int64(w[2])
		if w[1] > 1<<16 || at < AtEnd || at >= int64(d.nops) {
			return fmt.Sprintf("view of proc %d at %d out of range", w[1], at)
		}
		d.cur = &View{Proc: int(w[1]), At: int(at)}
		if d.views < len(d.sizes) {
			v, z := d.cur, d.sizes[d.views]
			// Lists without records stay nil, as appending left them.
			if z[0] > 0 {
				v.VMAs = make([]VMA, 0, z[0])
			}
			if z[1] > 0 {
				v.Runs = make([]Run, 0, z[1])
			}
			if z[2] > 0 {
				v.Pages = make(PageDigests, 0, z[2])
			}
			if z[3] > 0 {
				v.Words = make(Words, 0, z[3])
			}
		}
		d.views++
	case RecVMA, RecRun, RecPage, RecWord, RecViewEnd:
		if d.cur == nil {
			return fmt.Sprintf("record type %d outside a view", w[0])
		}
		return d.viewRecord(w)
	case RecEvent:
		o.Events = append(o.Events, recordEvent(w[1], w[2], w[3]))
	default:
		return fmt.Sprintf("unknown record type %d", w[0])
	}
	return ""
}

// viewRecord takes in a record of the current view.
func (d *decoder) viewRecord(w [RecordWords]uint64) string {
	cur := d.cur
	if w[0] == RecVMA {
		if w[2] < w[1] {
			return fmt.Sprintf("VMA end %#x before start %#x", w[2], w[1])
		}
		cur.VMAs = append(cur.VMAs, VMA{Start: w[1], End: w[2], Prot: ProtString(w[3]), Offset: w[4], Inode: w[5]})
		return ""
	}
	if w[0] == RecViewEnd {
		cur.Truncated = w[1] != 0
		d.o.Views = append(d.o.Views, *cur)
		d.cur = nil
		return ""
	}
	if w[1] >= uint64(d.nregions) {
		return fmt.Sprintf("region %d out of range (%d regions)", w[1], d.nregions)
	}
	reg := int(w[1])
	switch w[0] {
	case RecRun:
		if w[2] >= 1<<20 || w[3] == 0 || w[3] >= 1<<20 || w[4] < uint64(Readable) || w[4] > uint64(BeyondEOF) {
			return fmt.Sprintf("bad run first=%d n=%d state=%d", w[2], w[3], w[4])
		}
		cur.Runs = append(cur.Runs, Run{Region: reg, First: int(w[2]), N: int(w[3]), State: PageState(w[4])})
	case RecPage:
		if w[2] >= 1<<20 || w[4] > 512 {
			return fmt.Sprintf("bad page %d nonzero %d", w[2], w[4])
		}
		cur.Pages = append(cur.Pages, PageDigest{Region: reg, Page: int(w[2]), Digest: w[3], NonZero: int(w[4])})
	case RecWord:
		if w[2] >= 1<<40 {
			return fmt.Sprintf("word offset %#x out of range", w[2])
		}
		cur.Words = append(cur.Words, Word{Region: reg, Off: w[2], Value: w[3]})
	}
	return ""
}

// recordEvent turns a RecEvent record into a typed event.
func recordEvent(code, a, b uint64) Event {
	switch code {
	case EventChildFault:
		e := NewEvent(EvChildFault, "child could not run op %d (errno %d)", a, b)
		e.Op, e.Errno = int(min(a, 1<<30)), int(min(b, 1<<30))
		return e
	case EventThreadFault:
		e := NewEvent(EvThreadFault, "thread t%d faulted running op %d (memory changed under it)", b, a)
		e.Op, e.Thread = int(min(a, 1<<30)), int(min(b, 1<<30))
		return e
	case EventViewOverrun:
		e := NewEvent(EvViewOverrun, "view of proc %d has more than %d non-zero words; extra words dropped", a, b)
		e.Proc, e.Count = int(min(a, 1<<30)), int(min(b, 1<<30))
		return e
	}
	return NewEvent(EvNote, "event %d (%d, %d)", code, a, b)
}

// Encoder appends records to a byte slice; tests and the simulated targets
// use it to produce streams that Decode reads. (The executor's children
// write the same layout into shared memory without allocating.)
type Encoder struct{ Buf []byte }

// NewEncoder returns an encoder with an empty stream.
func NewEncoder() *Encoder {
	e := &Encoder{Buf: make([]byte, HeaderSize)}
	binary.LittleEndian.PutUint64(e.Buf, Magic)
	return e
}

// Add appends one record.
func (e *Encoder) Add(typ uint64, fields ...uint64) {
	var r [RecordSize]byte
	binary.LittleEndian.PutUint64(r[:], typ)
	for i, f := range fields {
		if i+1 < RecordWords {
			binary.LittleEndian.PutUint64(r[(i+1)*8:], f)
		}
	}
	e.Buf = append(e.Buf, r[:]...)
	n := binary.LittleEndian.Uint64(e.Buf[8:]) + 1
	binary.LittleEndian.PutUint64(e.Buf[8:], n)
	binary.LittleEndian.PutUint64(e.Buf[16:], n)
}
