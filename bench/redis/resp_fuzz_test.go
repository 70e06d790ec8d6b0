package redis

import (
	"bytes"
	"testing"
)

// FuzzReadReply: the RESP reader never panics or allocates without bound,
// and what it accepts from a well-formed stream it reads back exactly.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":42\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*2\r\n$1\r\na\r\n:1\r\n",
		"*-1\r\n", "$99999999999\r\n", "*99999999\r\n", "$3\r\nabcXY"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rep, err := newReader(bytes.NewReader(in)).reply()
		if err != nil {
			return
		}
		if rep.Kind == '$' && !rep.Nil && !bytes.Contains(in, []byte(rep.Str)) {
			t.Fatalf("bulk string %q is not in the input %q", rep.Str, in)
		}
	})
}

func TestReplyLimits(t *testing.T) {
	for _, in := range []string{"$99999999999\r\n", "*99999999\r\n", "$3\r\nabcXY", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"} {
		if _, err := newReader(bytes.NewReader([]byte(in))).reply(); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	rep, err := newReader(bytes.NewReader([]byte("*2\r\n$1\r\na\r\n:7\r\n"))).reply()
	if err != nil || len(rep.Array) != 2 || rep.Array[0].Str != "a" || rep.Array[1].Int != 7 {
		t.Fatalf("%+v %v", rep, err)
	}
}
