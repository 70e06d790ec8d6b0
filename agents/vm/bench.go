package vm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// benchInGuest (guest agent) runs `forkfuzz bench-worker` with the
// request on its stdin and returns its stdout.
func benchInGuest(m *Msg) *Msg {
	reply := &Msg{Type: MsgBenchResult, ID: m.ID}
	cmd := exec.Command(AgentBinary, "bench-worker")
	cmd.Stdin = bytes.NewReader(m.Bench)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		reply.Err = fmt.Sprintf("guest bench-worker: %v: %s", err, strings.TrimSpace(errb.String()))
		return reply
	}
	reply.Bench = json.RawMessage(bytes.TrimSpace(out.Bytes()))
	if !json.Valid(reply.Bench) {
		reply.Bench = nil
		reply.Err = fmt.Sprintf("guest bench-worker wrote no JSON: %.200q", out.String())
	}
	return reply
}

// Bench runs the fork benchmark worker in an idle VM with req (JSON) on
// its stdin and returns what it printed (JSON). timeout bounds the whole
// request.
func (t *Target) Bench(req []byte, timeout time.Duration) ([]byte, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errors.New("vm: target closed")
	}
	in := <-t.idle
	defer func() { t.idle <- in }()
	if !in.running() {
		if err := in.boot(); err != nil {
			return nil, err
		}
	}
	in.nextID++
	id := in.nextID
	in.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := WriteMsg(in.conn, &Msg{Type: MsgBench, ID: id, Bench: req}); err != nil {
		in.stop()
		return nil, fmt.Errorf("vm %d: send bench request: %w", in.idx, err)
	}
	overall := time.NewTimer(timeout)
	defer overall.Stop()
	start := in.mark
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			// A kernel report (the benchmark's process may be stuck in
			// the kernel, the agent still beating): give the console a
			// moment to finish it, then stop the VM and report it.
			cons, _ := in.con.Since(start)
			if r := scanReports(cons); r != nil {
				time.Sleep(2 * time.Second)
				in.pipe.catchUp(time.Second)
				cons, end := in.con.Since(start)
				in.mark = end
				in.stop()
				return nil, &KernelReportError{Title: r.Title, Kind: string(r.Kind), Report: r.Text, Console: lastBytes(cons, 256<<10),
					VM: in.idx, Kernel: in.t.cfg.Kernel + " (" + in.uname + ")", Program: "(fork benchmark)", Restarted: true}
			}
		case m := <-in.msgs:
			if m.Type != MsgBenchResult || m.ID != id {
				continue
			}
			if m.Err != "" {
				return nil, fmt.Errorf("vm %d: %s", in.idx, m.Err)
			}
			return m.Bench, nil
		case err := <-in.readErr:
			in.stop()
			return nil, fmt.Errorf("vm %d: agent connection broke during the benchmark: %v", in.idx, err)
		case <-in.proc.exited():
			in.stop()
			return nil, fmt.Errorf("vm %d: QEMU exited during the benchmark: %s", in.idx, in.exitStatus())
		case <-overall.C:
			in.stop()
			return nil, fmt.Errorf("vm %d: no benchmark result within %v", in.idx, timeout)
		}
	}
}
