package vm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

func TestWireRoundTrip(t *testing.T) {
	msgs := []*Msg{
		{Type: MsgHello, Uname: "6.1.0", Uptime: 3.5, Steps: []string{"write /proc/sys/vm/x 1: ok"}},
		{Type: MsgRun, ID: 7, Program: "forkfuzz v1\n", Options: &executor.Options{WordCap: 3}},
		{Type: MsgResult, ID: 7, Observation: json.RawMessage(`{"version":1}`)},
		{Type: MsgResult, ID: 8, Crash: &Crash{Hang: true, Status: "no answer"}},
		{Type: MsgProgress, Uptime: 9},
	}
	var buf bytes.Buffer
	for _, m := range msgs {
		if err := WriteMsg(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range msgs {
		got, err := ReadMsg(&buf)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if !bytes.Equal(a, b) {
			t.Errorf("got %s want %s", a, b)
		}
	}
	if _, err := ReadMsg(&buf); err != io.EOF {
		t.Errorf("at end: %v, want io.EOF", err)
	}
}

func frame(body string) []byte {
	b := append([]byte("FFZW\x00\x00\x00\x00"), body...)
	binary.BigEndian.PutUint32(b[4:], uint32(len(body)))
	return b
}

func TestWireErrors(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte("FFZ"), "inside a frame header"},
		{[]byte("XXXX\x00\x00\x00\x01{"), "bad magic"},
		{[]byte("FFZW\xff\xff\xff\xff"), "exceeds the limit"},
		{[]byte("FFZW\x00\x00\x00\x10{}"), "inside a 16-byte frame"},
		{frame(`{"v":1,`), "bad JSON"},
		{frame(`{"v":2,"type":"hello"}`), "protocol version 2"},
		{frame(`{"v":1,"type":"bogus"}`), `unknown message type "bogus"`},
		{frame(`{"v":1,"type":"result","id":3}`), "carries 0 of"},
		{frame(`{"v":1,"type":"result","id":3,"err":"x","crash":{"status":"s"}}`), "carries 2 of"},
		{frame(`{"v":1,"type":"run","id":3}`), "no program"},
	} {
		_, err := ReadMsg(bytes.NewReader(c.in))
		var fe *FrameError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want a FrameError containing %q", c.in, err, c.want)
		}
	}
}

func FuzzReadMsg(f *testing.F) {
	var buf bytes.Buffer
	WriteMsg(&buf, &Msg{Type: MsgResult, ID: 1, Observation: json.RawMessage(`{"version":1,"ops":[]}`)})
	f.Add(buf.Bytes())
	f.Add(frame(`{"v":1,"type":"run","id":1,"program":"forkfuzz v1\n"}`))
	f.Add([]byte("FFZW\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			m, err := ReadMsg(r)
			if err != nil {
				var fe *FrameError
				if err != io.EOF && !errors.As(err, &fe) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			// What decodes must re-encode and decode to the same message.
			var out bytes.Buffer
			if err := WriteMsg(&out, m); err != nil {
				t.Fatal(err)
			}
			m2, err := ReadMsg(&out)
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			a, _ := json.Marshal(m)
			c, _ := json.Marshal(m2)
			if !bytes.Equal(a, c) {
				t.Fatalf("round trip: %s != %s", a, c)
			}
		}
	})
}
