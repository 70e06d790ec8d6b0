package vm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

// The host and the guest agent talk over one virtio-serial port in frames:
//
//	"FFZW" | length (uint32, big endian) | JSON message (length bytes)
//
// Every message carries the protocol version; a frame with another version,
// a bad magic, an oversized length or malformed JSON is an error that says
// which.

// WireVersion is the host<->guest protocol version.
const WireVersion = 1

// MaxFrame bounds one frame's payload (observations of big programs are
// the largest messages).
const MaxFrame = 64 << 20

var frameMagic = [4]byte{'F', 'F', 'Z', 'W'}

// Message types.
const (
	MsgHello    = "hello"    // guest: booted, set up, ready for programs
	MsgProgress = "progress" // guest: heartbeat, once a second
	MsgRun      = "run"      // host: run a program
	MsgResult   = "result"   // guest: the outcome of a run
	MsgLog      = "log"      // guest: a line for the host's log
	// MsgBench (host) runs `forkfuzz bench-worker` in the guest with Bench
	// on its stdin; MsgBenchResult (guest) carries its stdout in Bench, or
	// Err.
	MsgBench       = "bench"
	MsgBenchResult = "bench-result"
)

// Msg is one message in either direction; Type says which fields are set.
type Msg struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	ID   uint64 `json:"id,omitempty"`

	// run
	Program string            `json:"program,omitempty"`
	Options *executor.Options `json:"options,omitempty"`
	// HoldMs (TEST ONLY) makes the agent wait this long before running,
	// so tests can act on a VM in the middle of a program.
	HoldMs int `json:"hold_ms,omitempty"`
	// TestPath, TestValue (TEST ONLY): the agent writes TestValue to
	// TestPath before running (after HoldMs), e.g. "c" to
	// /proc/sysrq-trigger to crash the kernel mid-program, or "WARNING" to
	// LKDTM's provoke-crash/DIRECT.
	TestPath  string `json:"test_path,omitempty"`
	TestValue string `json:"test_value,omitempty"`
	// TestRead (TEST ONLY): the agent reads this guest file before
	// running and returns its content in the result's Text (tests check
	// forkfuzz's evidence against kernel counters forkfuzz itself must
	// not depend on).
	TestRead string `json:"test_read,omitempty"`

	// result: exactly one of Observation, Crash, Err.
	Observation json.RawMessage `json:"observation,omitempty"`
	Crash       *Crash          `json:"crash,omitempty"`
	Err         string          `json:"err,omitempty"`
	// Phases (result) are where the run's time went in the guest
	// (obs.Observation.Phases), microseconds by phase.
	Phases map[string]int64 `json:"phases,omitempty"`

	// hello
	Uname  string   `json:"uname,omitempty"`
	Uptime float64  `json:"uptime,omitempty"` // guest seconds since boot (hello, progress)
	Steps  []string `json:"steps,omitempty"`  // set-up steps run, and their outcome
	// ForkImpls are the fork-implementation profiles whose knob the guest
	// kernel has (executor.AvailableForkImpls; "stock" always).
	ForkImpls []string `json:"fork_impls,omitempty"`
	// FileSystems are the file systems of the file region kinds the
	// guest has a directory on (executor.AvailableFileSystems).
	FileSystems []string `json:"file_systems,omitempty"`

	// log
	Text string `json:"text,omitempty"`

	// bench, bench-result: the benchmark request and its result (JSON).
	Bench json.RawMessage `json:"bench,omitempty"`
}

// Crash is an executor.CrashError on the wire.
type Crash struct {
	Hang   bool   `json:"hang,omitempty"`
	Status string `json:"status"`
	Lost   bool   `json:"lost,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	State  string `json:"state,omitempty"`
}

// FrameError is a malformed frame.
type FrameError struct{ Reason string }

func (e *FrameError) Error() string { return "vm wire: " + e.Reason }

// WriteMsg encodes m (its version set to WireVersion) as one frame.
func WriteMsg(w io.Writer, m *Msg) error {
	m.V = WireVersion
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) > MaxFrame {
		return &FrameError{fmt.Sprintf("%s message of %d bytes exceeds the %d-byte frame limit", m.Type, len(body), MaxFrame)}
	}
	buf := make([]byte, 8+len(body))
	copy(buf, frameMagic[:])
	binary.BigEndian.PutUint32(buf[4:], uint32(len(body)))
	copy(buf[8:], body)
	_, err = w.Write(buf)
	return err
}

var knownTypes = map[string]bool{MsgHello: true, MsgProgress: true, MsgRun: true, MsgResult: true, MsgLog: true, MsgBench: true, MsgBenchResult: true}

// ReadMsg reads one frame. io.EOF means the stream ended cleanly between
// frames; a *FrameError means the frame was malformed.
func ReadMsg(r io.Reader) (*Msg, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &FrameError{"stream ended inside a frame header"}
		}
		return nil, err
	}
	if [4]byte(hdr[:4]) != frameMagic {
		return nil, &FrameError{fmt.Sprintf("bad magic %q (want %q)", hdr[:4], frameMagic[:])}
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n > MaxFrame {
		return nil, &FrameError{fmt.Sprintf("frame length %d exceeds the limit %d", n, MaxFrame)}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, &FrameError{fmt.Sprintf("stream ended inside a %d-byte frame: %v", n, err)}
	}
	return DecodeMsg(body)
}

// DecodeMsg decodes and validates one frame's payload.
func DecodeMsg(body []byte) (*Msg, error) {
	var m Msg
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &FrameError{fmt.Sprintf("bad JSON payload: %v", err)}
	}
	if m.V != WireVersion {
		return nil, &FrameError{fmt.Sprintf("protocol version %d, this forkfuzz speaks %d (host and guest agent are different builds?)", m.V, WireVersion)}
	}
	if !knownTypes[m.Type] {
		return nil, &FrameError{fmt.Sprintf("unknown message type %q", m.Type)}
	}
	if m.Type == MsgResult {
		set := 0
		if len(m.Observation) > 0 {
			set++
		}
		if m.Crash != nil {
			set++
		}
		if m.Err != "" {
			set++
		}
		if set != 1 {
			return nil, &FrameError{fmt.Sprintf("result %d carries %d of observation, crash, err (want exactly one)", m.ID, set)}
		}
	}
	if m.Type == MsgBench && len(m.Bench) == 0 {
		return nil, &FrameError{fmt.Sprintf("bench %d carries no request", m.ID)}
	}
	if m.Type == MsgBenchResult && (len(m.Bench) > 0) == (m.Err != "") {
		return nil, &FrameError{fmt.Sprintf("bench-result %d carries both or neither of bench, err (want exactly one)", m.ID)}
	}
	if m.Type == MsgRun && m.Program == "" {
		return nil, &FrameError{fmt.Sprintf("run %d carries no program", m.ID)}
	}
	return &m, nil
}

// skipToFrame discards bytes up to the next frame's magic: the tail of a
// frame a restored guest had begun before its state was saved.
func skipToFrame(r *bufio.Reader) error {
	for {
		b, err := r.Peek(len(frameMagic))
		if err != nil {
			return err
		}
		if [4]byte(b) == frameMagic {
			return nil
		}
		r.Discard(1)
	}
}
