package vm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWireBench(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range []*Msg{
		{Type: MsgBench, ID: 3, Bench: json.RawMessage(`{"sizes":[2097152]}`)},
		{Type: MsgBenchResult, ID: 3, Bench: json.RawMessage(`{"uname":"6.1"}`)},
		{Type: MsgBenchResult, ID: 4, Err: "guest bench-worker: exit status 2"},
	} {
		if err := WriteMsg(&buf, m); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMsg(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != m.Type || got.ID != m.ID || string(got.Bench) != string(m.Bench) || got.Err != m.Err {
			t.Errorf("round trip: got %+v want %+v", got, m)
		}
	}
	for body, want := range map[string]string{
		`{"v":1,"type":"bench","id":1}`:                             "carries no request",
		`{"v":1,"type":"bench-result","id":1}`:                      "both or neither",
		`{"v":1,"type":"bench-result","id":1,"bench":{},"err":"x"}`: "both or neither",
	} {
		if _, err := DecodeMsg([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
