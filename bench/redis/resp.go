package redis

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// Limits on a reply, so a corrupt or hostile stream cannot make the
// client allocate without bound or recurse without end.
const (
	maxBulk  = 512 << 20
	maxArray = 1 << 20
	maxDepth = 32
)

type reader struct{ b *bufio.Reader }

func newReader(r io.Reader) *reader { return &reader{bufio.NewReaderSize(r, 1<<16)} }

func (r *reader) line() (string, error) {
	l, err := r.b.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(l) < 2 || l[len(l)-2] != '\r' {
		return "", fmt.Errorf("resp: line without CRLF: %q", l)
	}
	return l[:len(l)-2], nil
}

func (r *reader) reply() (Reply, error) { return r.replyAt(0) }

func (r *reader) replyAt(depth int) (Reply, error) {
	if depth > maxDepth {
		return Reply{}, fmt.Errorf("resp: arrays nested deeper than %d", maxDepth)
	}
	l, err := r.line()
	if err != nil {
		return Reply{}, err
	}
	if l == "" {
		return Reply{}, fmt.Errorf("resp: empty line")
	}
	rep := Reply{Kind: l[0]}
	body := l[1:]
	switch l[0] {
	case '+', '-':
		rep.Str = body
	case ':':
		rep.Int, err = strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return rep, fmt.Errorf("resp: bulk length %q", body)
		}
		if n < 0 {
			rep.Nil = true
			return rep, nil
		}
		if n > maxBulk {
			return rep, fmt.Errorf("resp: bulk string of %d bytes (limit %d)", n, maxBulk)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r.b, b); err != nil {
			return rep, err
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return rep, fmt.Errorf("resp: bulk string of %d bytes not followed by CRLF", n)
		}
		rep.Str = string(b[:n])
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return rep, fmt.Errorf("resp: array length %q", body)
		}
		if n < 0 {
			rep.Nil = true
			return rep, nil
		}
		if n > maxArray {
			return rep, fmt.Errorf("resp: array of %d elements (limit %d)", n, maxArray)
		}
		rep.Array = make([]Reply, n)
		for i := range rep.Array {
			if rep.Array[i], err = r.replyAt(depth + 1); err != nil {
				return rep, err
			}
		}
	default:
		return rep, fmt.Errorf("resp: unknown reply type %q", l[0])
	}
	return rep, err
}
