package redis

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
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

func (r *reader) reply() (Reply, error) {
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
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r.b, b); err != nil {
			return rep, err
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
		rep.Array = make([]Reply, n)
		for i := range rep.Array {
			if rep.Array[i], err = r.reply(); err != nil {
				return rep, err
			}
		}
	default:
		return rep, fmt.Errorf("resp: unknown reply type %q", l[0])
	}
	return rep, err
}
