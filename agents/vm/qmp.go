package vm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// qmpConn is a connection to QEMU's machine protocol (QMP): one JSON
// object per line; a command's answer is {"return": ...} or {"error":
// ...}; asynchronous {"event": ...} lines in between are skipped.
type qmpConn struct {
	c net.Conn
	r *bufio.Reader
}

// dialQMP connects to the QMP socket at path and negotiates
// capabilities. QEMU creates the socket before the guest runs, so a
// missing socket is an error at once.
func dialQMP(path string, timeout time.Duration) (*qmpConn, error) {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	q := &qmpConn{c: c, r: bufio.NewReader(c)}
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := q.read(); err != nil { // the greeting
		c.Close()
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := q.do("qmp_capabilities", nil, timeout); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmpConn) close() { q.c.Close() }

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

func (q *qmpConn) read() (*qmpReply, error) {
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var r qmpReply
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("bad QMP line %q: %w", line, err)
	}
	return &r, nil
}

// do runs one command and returns its "return" value.
func (q *qmpConn) do(cmd string, args any, timeout time.Duration) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	q.c.SetDeadline(time.Now().Add(timeout))
	if _, err := q.c.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		r, err := q.read()
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		switch {
		case r.Event != "":
			continue
		case r.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", cmd, r.Error.Class, r.Error.Desc)
		}
		return r.Return, nil
	}
}

// status is the VM's run state ("running", "paused", "inmigrate", ...).
func (q *qmpConn) status(timeout time.Duration) (string, error) {
	raw, err := q.do("query-status", nil, timeout)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", fmt.Errorf("qmp query-status: %w", err)
	}
	return st.Status, nil
}
