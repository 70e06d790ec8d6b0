package dist

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
	"github.com/forkfuzz/forkfuzz/agents/vm"
	"github.com/forkfuzz/forkfuzz/campaign"
	"github.com/forkfuzz/forkfuzz/checker"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/gen"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

const smallProg = "forkfuzz v1\nregion r0 anon-private pages=1\nstore r0 off=0x0\nfork f0\nwait f0\n"

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustResult(t testing.TB, r *Result) []byte {
	b, err := EncodeResult(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWireRoundTrip(t *testing.T) {
	// The first program from index 3 whose forks inject nothing: the
	// model does not predict a failed fork's rollback measurements.
	i := int64(3)
	p := campaign.NewProgram(5, i, nil, gen.DefaultWeights())
	for ; injects(p); i++ {
		p = campaign.NewProgram(5, i+1, nil, gen.DefaultWeights())
	}
	w := Work{V: WireVersion, Campaign: "c1", CampaignSeed: 5, Index: i, Seed: campaign.ProgramSeed(5, i), Program: string(p.Format()), Target: "sim",
		Sites: []campaign.FaultSite{{Fault: campaign.Fault{Op: forkOp(p)}, Site: "failslab: anon_vma_fork <- dup_mmap"}}}
	got, gp, err := DecodeWork(mustJSON(t, w))
	if err != nil || !reflect.DeepEqual(*got, w) || string(gp.Format()) != w.Program {
		t.Fatalf("work round trip: %+v %v", got, err)
	}
	o := checker.Expected(p)
	r := Result{V: WireVersion, Campaign: "c1", Index: i, Agent: "a", Delivered: 2, Program: w.Program, Observation: o, Started: time.Now()}
	gr, _, err := DecodeResult(mustResult(t, &r))
	if err != nil || gr.Delivered != 2 || len(gr.Observation.Ops) != len(p.Ops) {
		t.Fatalf("result round trip: %v", err)
	}
	v, herr := judge.Judge(p, gr.Observation, gr.Err.Err())
	if herr != nil || !v.OK() {
		t.Fatalf("the model's prediction, sent over the wire, is judged wrong: %v %v", v, herr)
	}
}

// injects reports whether a fork of p injects a failure.
func injects(p *prog.Program) bool {
	for _, op := range p.Ops {
		if op.Kind == prog.OpFork && (op.FailNth > 0 || op.ChildFail > 0 || op.OOMMemcg > 0 || op.ChildOOM > 0) {
			return true
		}
	}
	return false
}

// Errors travel as data and are judged on the coordinator as they would
// be where they happened.
func TestRunErrorRoundTrip(t *testing.T) {
	kr := &vm.KernelReportError{Title: "WARNING in copy_pte_range", Kind: "warning", Console: "..."}
	for _, c := range []struct {
		err  error
		kind string
		sig  string // "" : a harness error
	}{
		{&executor.CrashError{Status: "signal: killed"}, "event", "executor-crash"},
		{&executor.CrashError{Hang: true, Status: "timeout"}, "event", "executor-hang"},
		{kr, "event", kr.Signature()},
		{errors.New("qemu would not start"), "harness", ""},
	} {
		re := NewRunError(c.err)
		b := mustResult(t, &Result{V: WireVersion, Campaign: "c", Agent: "a", Program: smallProg, Err: re})
		r, p, err := DecodeResult(b)
		if err != nil || r.Err.Kind != c.kind {
			t.Fatalf("%v: %+v %v", c.err, r, err)
		}
		v, herr := judge.Judge(p, nil, r.Err.Err())
		if c.sig == "" {
			if herr == nil || herr.Error() != c.err.Error() {
				t.Fatalf("harness error became %v / %v", v, herr)
			}
			continue
		}
		if herr != nil || !v.Has(c.sig) {
			t.Fatalf("%v judged as %v / %v, want %s", c.err, v, herr, c.sig)
		}
		if ev, ok := c.err.(agents.Event); ok && v.Issues[0].Explanation != ev.Explanation() {
			t.Fatalf("explanation changed on the wire: %q", v.Issues[0].Explanation)
		}
	}
	if NewRunError(nil) != nil || (*RunError)(nil).Err() != nil {
		t.Fatal("nil error does not round-trip")
	}
}

func TestDecodeRejects(t *testing.T) {
	p := checker.Expected(mustParse(t, smallProg))
	for _, c := range []struct {
		name, what, msg string
		b               []byte
	}{
		{"version", "work", "wire version 9", mustJSON(t, Work{V: 9, Campaign: "c", Program: smallProg})},
		{"campaign", "work", "field campaign", mustJSON(t, Work{V: WireVersion, Campaign: "a b", Program: smallProg})},
		{"index", "work", "field index", mustJSON(t, Work{V: WireVersion, Campaign: "c", Index: -1, Program: smallProg})},
		{"program", "work", "field program", mustJSON(t, Work{V: WireVersion, Campaign: "c", Program: "forkfuzz v1\nfrob\n"})},
		{"sites", "work", "field sites[0]: op 0 is not a fork", mustJSON(t, Work{V: WireVersion, Campaign: "c", Program: smallProg, Sites: []campaign.FaultSite{{Site: "x"}}})},
		{"sites range", "work", "field sites[0]: op 99 is not a fork", mustJSON(t, Work{V: WireVersion, Campaign: "c", Program: smallProg, Sites: []campaign.FaultSite{{Fault: campaign.Fault{Op: 99}, Site: "x"}}})},
		{"unknown field", "work", "unknown field", []byte(`{"v":1,"campaign":"c","program":"forkfuzz v1\n","colour":1}`)},
		{"trailing", "work", "trailing", []byte(`{"v":1,"campaign":"c","program":"forkfuzz v1\n"} {}`)},
		{"nothing", "result", "neither observation nor error", mustJSON(t, Result{V: WireVersion, Campaign: "c", Program: smallProg})},
		{"ops", "result", "op results", mustResult(t, &Result{V: WireVersion, Campaign: "c", Program: smallProg + "store r0 off=0x8\n", Observation: p})},
		{"kind", "result", "unknown kind", mustJSON(t, Result{V: WireVersion, Campaign: "c", Program: smallProg, Err: &RunError{Kind: "oops"}})},
		{"gob", "result", "field observation_gob", []byte(fmt.Sprintf(`{"v":%d,"campaign":"c","program":"forkfuzz v1\n","observation_gob":"AAAA"}`, WireVersion))},
		{"event", "result", "without an event", mustJSON(t, Result{V: WireVersion, Campaign: "c", Program: smallProg, Err: &RunError{Kind: "event"}})},
		{"min version", "minimize", "wire version 2", mustJSON(t, MinimizeResult{V: 2, Campaign: "c", Minimized: Minimized{Signature: "s", Program: smallProg}})},
		{"min campaign", "minimize", "field campaign", mustJSON(t, MinimizeResult{V: WireVersion, Campaign: "", Minimized: Minimized{Signature: "s", Program: smallProg}})},
		{"min signature", "minimize", "minimized.signature", mustJSON(t, MinimizeResult{V: WireVersion, Campaign: "c", Minimized: Minimized{Program: smallProg}})},
		{"min program", "minimize", "minimized.program", mustJSON(t, MinimizeResult{V: WireVersion, Campaign: "c", Minimized: Minimized{Signature: "s", Program: "forkfuzz v1\nfrob\n"}})},
		{"min skipped", "minimize", "field skipped", mustJSON(t, MinimizeResult{V: WireVersion, Campaign: "c", Skipped: "no", Minimized: Minimized{Signature: "s", Program: smallProg}})},
		{"min ops", "minimize", "op results", mustJSON(t, MinimizeResult{V: WireVersion, Campaign: "c", Minimized: Minimized{Signature: "s", Program: smallProg + "store r0 off=0x8\n", Observation: p}})},
		{"agent", "heartbeat", "field agent", mustJSON(t, Heartbeat{V: WireVersion, Agent: ""})},
	} {
		var err error
		switch c.what {
		case "work":
			_, _, err = DecodeWork(c.b)
		case "result":
			_, _, err = DecodeResult(c.b)
		case "heartbeat":
			_, err = DecodeHeartbeat(c.b)
		case "minimize":
			_, err = DecodeMinimizeResult(c.b)
		}
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want a DecodeError with %q", c.name, err, c.msg)
		}
	}
}

func FuzzDecodeWork(f *testing.F) {
	f.Add(mustJSON(f, Work{V: WireVersion, Campaign: "c", Index: 1, Program: smallProg, Target: "sim"}))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, p, err := DecodeWork(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		w2, p2, err := DecodeWork(mustJSON(t, w))
		if err != nil || !reflect.DeepEqual(*w2, *w) || string(p2.Format()) != string(p.Format()) {
			t.Fatalf("re-decoding %+v: %+v %v", w, w2, err)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	p := mustParse(f, smallProg)
	f.Add(mustResult(f, &Result{V: WireVersion, Campaign: "c", Agent: "a", Program: smallProg, Observation: checker.Expected(p)}))
	f.Add(mustJSON(f, Result{V: WireVersion, Campaign: "c", Agent: "a", Program: smallProg, Err: &RunError{Kind: "event", Message: "x", Event: &agents.RecordedEvent{OracleName: "executor-crash", Sig: "executor-crash"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, p, err := DecodeResult(b)
		if err != nil {
			return
		}
		// The coordinator judges whatever decodes without panicking.
		judge.Judge(p, r.Observation, r.Err.Err())
		if _, _, err := DecodeResult(mustResult(t, r)); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add(mustJSON(f, Heartbeat{V: WireVersion, Agent: "a", Target: "sim", Time: time.Unix(1, 0)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeartbeat(b)
		if err != nil {
			return
		}
		if _, err := DecodeHeartbeat(mustJSON(t, h)); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}

func FuzzDecodeMinimizeResult(f *testing.F) {
	f.Add(mustJSON(f, MinimizeResult{V: WireVersion, Campaign: "c", Agent: "a", Minimized: Minimized{Signature: "snapshot:x", Program: smallProg}}))
	f.Add(mustJSON(f, MinimizeResult{V: WireVersion, Campaign: "c", Agent: "a", Minimized: Minimized{Signature: "snapshot:x"}, Skipped: "no"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeMinimizeResult(b)
		if err != nil {
			return
		}
		if r.Minimized.Signature == "" {
			t.Fatal("accepted without a signature")
		}
		if _, err := DecodeMinimizeResult(mustJSON(t, r)); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}

// forkOp is the index of p's first fork.
func forkOp(p *prog.Program) int { return p.ForkOp(0) }
