package cut

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the worker.
func TestMain(m *testing.M) {
	if os.Getenv("FORKFUZZ_PORCUPINE_WORKER") == "1" {
		if err := ServeWorker(os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testWorker(limit uint64) *Isolated {
	return &Isolated{MemLimit: limit, Command: func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FORKFUZZ_PORCUPINE_WORKER=1")
		return cmd
	}}
}

// TestIsolatedAgrees: the worker gives porcupine's verdict on random
// histories, violations included.
func TestIsolatedAgrees(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	w := testWorker(1 << 30)
	n := 20
	if testing.Short() {
		n = 6
	}
	var viol int
	// At least n histories, and on until one is a violation (a short run
	// of 6 may draw none: the test must still see the worker say no).
	for i := 0; i < n || (viol == 0 && i < 200); i++ {
		h := randomHistory(r, 1+r.IntN(3), 5+r.IntN(20), i%2 == 1)
		want, _, _ := Porcupine(h, 10*time.Second)
		got := w.Porcupine(h, 10*time.Second)
		if got.Result != want.Result {
			t.Fatalf("history %d: worker says %v (%s), in-process porcupine %v", i, got.Result, got.Reason, want.Result)
		}
		if got.Result == Violation {
			viol++
		}
	}
	if viol == 0 {
		t.Fatalf("no violation among %d histories: the test would not notice a worker that always says ok", n)
	}
}

// TestIsolatedMemoryCap: a history that makes porcupine's search explode
// (many overlapping writers on shared cells) ends as Unknown when the
// worker hits its cap, instead of eating the machine's memory.
func TestIsolatedMemoryCap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the blow-up takes a few seconds")
	}
	h := &History{Snapshot: map[uint64]uint64{}, Initial: map[uint64]uint64{}}
	const threads, per = 8, 2000
	for th := 1; th <= threads; th++ {
		for i := 0; i < per; i++ {
			// Every write overlaps every other thread's writes of the
			// same cell: the search has to try their orders.
			h.Writes = append(h.Writes, Write{Thread: th, Cell: uint64(i % 64), Value: uint64(th)<<32 | uint64(i+1), Inv: int64(i * 10), Resp: int64(i*10 + 15)})
		}
	}
	h.ForkInv, h.ForkResp = 0, per*10
	for c := uint64(0); c < 64; c++ {
		h.Snapshot[c] = 0xdead // never written: no cut exists, but proving it is the hard part
	}
	start := time.Now()
	v := testWorker(128<<20).Porcupine(h, 60*time.Second)
	t.Logf("verdict %v after %v: %s", v.Result, time.Since(start), v.Reason)
	if v.Result == Ok {
		t.Fatal("an impossible snapshot was accepted")
	}
	if v.Result == Unknown && !strings.Contains(v.Reason, "memory cap") && !strings.Contains(v.Reason, "no answer") {
		t.Fatalf("unknown for another reason: %s", v.Reason)
	}
}

// BenchmarkPorcupineScale measures porcupine alone (in a worker capped at
// 2 GiB, 60 s per history) and on the trimmed history, next to the exact
// check (BenchmarkCheck), for the note's table:
//
//	go test -run '^$' -bench PorcupineScale -benchtime 1x ./checker/cut
//
// A history porcupine cannot decide within its cap reports unknown=1.
func BenchmarkPorcupineScale(b *testing.B) {
	w := testWorker(2 << 30)
	for _, n := range benchSizes {
		h := benchHistory(n)
		for _, c := range []struct {
			name string
			h    *History
		}{{"porcupine", h}, {"porcupine-trimmed", Trim(h)}} {
			b.Run(fmt.Sprintf("writes=%d/%s", n, c.name), func(b *testing.B) {
				unknown := 0
				for b.Loop() {
					if v := w.Porcupine(c.h, 60*time.Second); v.Result == Unknown {
						unknown = 1
					}
				}
				b.ReportMetric(float64(unknown), "unknown")
				b.ReportMetric(float64(len(c.h.Writes)), "writes")
			})
		}
	}
}

// FuzzServeWorker: the worker's request decoder never panics, and what it
// accepts it answers with a decodable verdict.
func FuzzServeWorker(f *testing.F) {
	f.Add([]byte(`{"history":{"Writes":[{"thread":1,"cell":1,"value":5,"inv":0,"resp":10}],"Initial":{},"ForkInv":20,"ForkResp":30,"Snapshot":{"1":5}},"timeout_ns":1000000000}`))
	f.Add([]byte(`{"history":null}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 2048 {
			return // keep porcupine's search small
		}
		var out bytes.Buffer
		if err := ServeWorker(bytes.NewReader(in), &out); err != nil {
			return
		}
		var resp workerResponse
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("undecodable answer %q: %v", out.String(), err)
		}
		if resp.Result < Ok || resp.Result > Unknown {
			t.Fatalf("result %d out of range", resp.Result)
		}
	})
}
