package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// forkfuzzBinary builds cmd/forkfuzz once for the tests that run it as
// separate processes.
func forkfuzzBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "forkfuzz-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "forkfuzz")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/forkfuzz/forkfuzz/cmd/forkfuzz")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type proc struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	done chan struct{}
	err  error
}

func startProc(t *testing.T, dir, name string, args ...string) *proc {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(forkfuzzBinary(t), args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); out.Close(); close(p.done) }()
	return p
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.out.Name())
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// doneCount is the number of Done records of campaign c (0 while the
// coordinator is down).
func doneCount(ctx context.Context, js jetstream.JetStream, c string) int {
	s, err := js.Stream(ctx, "KV_"+DoneBucket)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("$KV."+DoneBucket+"."+c+".>"))
	if err != nil {
		return 0
	}
	return len(info.State.Subjects)
}

// TestKillAgentsAndRestartCoordinator runs a fixed campaign on a simulated
// kernel with a bug through a coordinator and three agents, each its own
// process. Agents are killed with SIGKILL at random moments (seeded,
// logged) and started again; the coordinator is killed with SIGKILL once,
// a third of the way through, and restarted. Afterwards every program
// index 0..N-1 must have exactly one stored result, and every signature
// must have been new exactly once.
func TestKillAgentsAndRestartCoordinator(t *testing.T) {
	n, kills := 600, 12
	if testing.Short() {
		n, kills = 200, 5
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DIST_KILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("kill schedule seed %d (DIST_KILL_SEED=%d replays it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	forkfuzzBinary(t)
	dir := t.TempDir()
	if d := os.Getenv("DIST_LOGDIR"); d != "" { // keep the processes' logs
		dir = d
		os.RemoveAll(filepath.Join(d, "js"))
		os.RemoveAll(filepath.Join(d, "work"))
	}
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	store, workdir := filepath.Join(dir, "js"), filepath.Join(dir, "work")
	coordArgs := []string{"coordinator", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--store-dir", store,
		"--workdir", workdir, "--campaign", "kill", "--seed", "11", "--programs", strconv.Itoa(n), "--target", "sim",
		"--ack-wait", "2s", "--queue", "64", "-q"}
	coord := startProc(t, dir, "coordinator-1", coordArgs...)
	defer func() {
		select {
		case <-coord.done:
		default:
			coord.kill()
		}
	}()
	agents := make([]*proc, 3)
	starts := 0
	startAgent := func(k int) {
		starts++
		agents[k] = startProc(t, dir, fmt.Sprintf("agent-%d-%d", k, starts), "agent", "--coordinator", url,
			"--id", fmt.Sprintf("a%d-%d", k, starts), "--target", "sim", "--fork", "async",
			"--mutant", "async-mprotect-nosync", "--minimize-runs", "20")
	}
	for k := range agents {
		startAgent(k)
	}
	defer func() {
		for _, a := range agents {
			a.kill()
		}
	}()

	// Watch progress through our own (reconnecting) connection.
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	restarted, killed := false, 0
	for {
		select {
		case <-coord.done:
		case <-ctx.Done():
			t.Fatalf("campaign not finished in time; coordinator log:\n%s", coord.tail())
		case <-time.After(time.Duration(50+r.IntN(300)) * time.Millisecond):
		}
		if isDone(coord) {
			if !restarted {
				t.Fatalf("the coordinator ended before its restart: %v\n%s", coord.err, coord.tail())
			}
			break
		}
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		done := doneCount(qctx, js, "kill")
		qcancel()
		if os.Getenv("DIST_TRACE") != "" {
			line := ""
			for _, cn := range [][2]string{{WorkStream, WorkerConsumer("sim")}, {ResultStream, "coordinator-kill"}} {
				if c, err := js.Consumer(ctx, cn[0], cn[1]); err == nil {
					if ci, err := c.Info(ctx); err == nil {
						line += fmt.Sprintf(" [%s pending %d ackpending %d waiting %d redelivered %d]", cn[1], ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.NumRedelivered)
					}
				}
			}
			t.Logf("%s done %d%s", time.Now().Format("15:04:05.000"), done, line)
		}
		if !restarted && done >= n/3 {
			t.Logf("SIGKILL coordinator at %d/%d done", done, n)
			coord.kill()
			time.Sleep(time.Duration(r.IntN(500)) * time.Millisecond)
			coord = startProc(t, dir, "coordinator-2", coordArgs...)
			restarted = true
			continue
		}
		if killed < kills && r.IntN(2) == 0 {
			k := r.IntN(len(agents))
			t.Logf("SIGKILL agent %s at %d/%d done", agents[k].name, done, n)
			agents[k].kill()
			killed++
			startAgent(k)
		}
	}
	if coord.err != nil && coord.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("coordinator: %v\n%s", coord.err, coord.tail())
	}
	summary := coord.tail()
	t.Logf("%d agent kills, coordinator restarted once; second coordinator:\n%s", killed, summary)
	for _, a := range agents {
		a.kill()
	}
	nc.Close()

	// Inspect what is stored, with the coordinator's store opened anew.
	_, st := testConnectedTo(t, ServerConfig{Listen: "127.0.0.1:0", StoreDir: store})
	keys := map[int64]int{}
	redelivered, newSigs := 0, map[string]int{}
	err = watchAll(ctx, st.Done, "kill.>", func(key string, v []byte) error {
		var i int64
		fmt.Sscanf(key, "kill.%d", &i)
		keys[i]++
		var d Done
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		if d.Delivered > 1 {
			redelivered++
		}
		for _, s := range d.New {
			newSigs[s]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var lost, twice []int64
	for i := int64(0); i < int64(n); i++ {
		switch keys[i] {
		case 0:
			lost = append(lost, i)
		case 1:
		default:
			twice = append(twice, i)
		}
	}
	if len(keys) != n || len(lost) > 0 || len(twice) > 0 {
		t.Errorf("%d results stored for %d programs; lost %v; stored twice %v", len(keys), n, lost, twice)
	}
	findings := 0
	err = watchAll(ctx, st.Findings, ">", func(key string, v []byte) error {
		var m FindingMeta
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		findings++
		if newSigs[m.Signature] != 1 {
			t.Errorf("signature %s was new in %d stored results, want 1", m.Signature, newSigs[m.Signature])
		}
		if FindingKey(m.Signature) != key {
			t.Errorf("finding %s under key %s", m.Signature, key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if findings == 0 || len(newSigs) != findings {
		t.Errorf("%d findings stored, %d signatures counted new", findings, len(newSigs))
	}
	dirs, _ := filepath.Glob(filepath.Join(workdir, "findings", "*", "signature"))
	if len(dirs) != findings {
		t.Errorf("%d finding directories for %d findings", len(dirs), findings)
	}
	// Every new finding was minimized by some agent (they all minimize)
	// before the campaign finished, whoever was killed meanwhile.
	minimized, _ := filepath.Glob(filepath.Join(workdir, "findings", "*", "minimized.ffz"))
	if len(minimized) != findings {
		t.Errorf("%d minimized programs for %d findings", len(minimized), findings)
	}
	wi, err := st.Work.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("COUNTS: %d programs, %d stored results (one per index: %v), %d redelivered before being stored, "+
		"%d findings (each new once), %d finding dirs (%d minimized), %d work messages left, %d agent kills, 1 coordinator kill",
		n, len(keys), len(lost) == 0 && len(twice) == 0, redelivered, findings, len(dirs), len(minimized), wi.State.Msgs, killed)
	if wi.State.Msgs != 0 {
		t.Errorf("%d work messages left in the queue after the campaign", wi.State.Msgs)
	}
	if !bytes.Contains([]byte(summary), []byte(fmt.Sprintf("campaign kill: %d programs", n))) {
		t.Errorf("the restarted coordinator's summary does not count %d programs:\n%s", n, summary)
	}
}

func isDone(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
