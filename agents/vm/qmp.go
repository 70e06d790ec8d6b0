package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"
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
// capabilities. QEMU creates the socket before the guest runs, but a
// moment after the agent's channel socket (what start waits for): a
// socket not there or not listening yet is waited for, up to
// qmpAppear (a QEMU that is gone is not waited for long).
func dialQMP(path string, timeout time.Duration) (*qmpConn, error) {
	deadline := time.Now().Add(min(timeout, qmpAppear))
	var c net.Conn
	var err error
	for {
		c, err = net.DialTimeout("unix", path, time.Until(deadline))
		if err == nil || !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	deadline = time.Now().Add(timeout)
	q := &qmpConn{c: c, r: bufio.NewReader(c)}
	c.SetDeadline(deadline)
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

// qmpAppear bounds the wait for QMP's socket to appear.
const qmpAppear = 5 * time.Second

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
