package redis

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Config is one scenario run.
type Config struct {
	Bin       Binary
	Dir       string // working directory (RDB files, logs)
	Keys      int
	ValueSize int
	Writers   int
	Rounds    int
	// Before and After are the writer load before each BGSAVE and after
	// it completed.
	Before, After time.Duration
	Seed          uint64
	// Corrupt (TEST ONLY) falsifies the snapshot read back from the RDB,
	// to prove the oracle bites: "drop-old" removes a key written long
	// before BGSAVE, "later-value" gives one key a value written after
	// BGSAVE returned.
	Corrupt string
	Log     io.Writer
}

// Corruptions are the values Config.Corrupt takes.
var Corruptions = []string{"drop-old", "later-value"}

// Round is one BGSAVE.
type Round struct {
	N      int   `json:"n"`
	BgInv  int64 `json:"bg_inv"`  // BGSAVE sent (ns)
	BgResp int64 `json:"bg_resp"` // its reply
	BgDone int64 `json:"bg_done"` // BGSAVE seen finished
	// ForkUsec is INFO's latest_fork_usec.
	ForkUsec  int64    `json:"latest_fork_usec"`
	RDBBytes  int64    `json:"rdb_bytes"`
	RDBKeys   int      `json:"rdb_keys"`
	Writes    int      `json:"writes"` // writer SETs during the round
	Finding   *Finding `json:"finding,omitempty"`
	Corrupted string   `json:"corrupted,omitempty"` // what Corrupt did, if anything
}

// Result is the whole run.
type Result struct {
	Config  Config
	Version string
	Rounds  []Round
	Ops     []Op // writer ops (not the load)
	LoadNs  int64
	UsedMem string
}

// scenario is a run in progress: the control connection and the
// writers', the write history so far and the result.
type scenario struct {
	cfg   Config
	ctl   *Conn
	conns []*Conn
	t0    time.Time
	hist  []Op
	res   *Result
	// seq: value ids above the load's, per writer interleaved; the next
	// round's start above the largest so far.
	seq, base uint64
}

func (sc *scenario) now() int64 { return int64(time.Since(sc.t0)) }

// Run runs the scenario.
func Run(cfg Config) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Writers < 1 || cfg.Keys < cfg.Writers || cfg.Rounds < 1 || cfg.ValueSize < 24 {
		return nil, fmt.Errorf("redis: need writers >= 1, keys >= writers, rounds >= 1, value size >= 24")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	srv, err := cfg.Bin.Start(cfg.Dir, "dump.rdb")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	ctl, err := Dial(srv.Sock)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	sc := &scenario{cfg: cfg, ctl: ctl, res: &Result{Config: cfg}, base: uint64(cfg.Keys) + 1}
	if info, err := ctl.Info("server"); err == nil {
		sc.res.Version = info["redis_version"]
	}
	sc.t0 = time.Now()
	if err := sc.load(); err != nil {
		return nil, err
	}
	sc.conns = make([]*Conn, cfg.Writers)
	for w := range sc.conns {
		if sc.conns[w], err = Dial(srv.Sock); err != nil {
			return nil, err
		}
		defer sc.conns[w].Close()
	}
	for r := 1; r <= cfg.Rounds; r++ {
		rd, err := sc.round(r)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "redis: round %d: BGSAVE call %v, child done after %v, latest_fork_usec %d, %d writes, RDB %d bytes %d keys: %s\n",
			r, time.Duration(rd.BgResp-rd.BgInv), time.Duration(rd.BgDone-rd.BgInv).Round(time.Millisecond), rd.ForkUsec, rd.Writes, rd.RDBBytes, rd.RDBKeys, verdictWord(rd.Finding))
		sc.res.Rounds = append(sc.res.Rounds, rd)
	}
	return sc.res, nil
}

// load writes every key over one pipelined connection, in batches of
// 1000; each key's load write is its owner's first write.
func (sc *scenario) load() error {
	cfg, ctl := sc.cfg, sc.ctl
	for k := 0; k < cfg.Keys; k += 1000 {
		end := min(k+1000, cfg.Keys)
		inv := sc.now()
		for j := k; j < end; j++ {
			ctl.Send("SET", KeyName(j), Value(uint64(j+1), cfg.ValueSize))
		}
		if err := ctl.Flush(); err != nil {
			return err
		}
		for j := k; j < end; j++ {
			if _, err := ctl.Read(); err != nil {
				return fmt.Errorf("load: %w", err)
			}
		}
		resp := sc.now()
		for j := k; j < end; j++ {
			sc.hist = append(sc.hist, Op{Writer: j % cfg.Writers, Key: j, Val: uint64(j + 1), Inv: inv, Resp: resp, Load: true})
		}
	}
	sc.res.LoadNs = sc.now()
	if info, err := ctl.Info("memory"); err == nil {
		sc.res.UsedMem = info["used_memory_human"]
	}
	fmt.Fprintf(cfg.Log, "redis: %s loaded %d keys of %d bytes in %v (used_memory %s); seed %d\n",
		sc.res.Version, cfg.Keys, cfg.ValueSize, time.Duration(sc.res.LoadNs).Round(time.Millisecond), sc.res.UsedMem, cfg.Seed)
	return nil
}

// round runs BGSAVE r under the writers' load and checks its snapshot.
func (sc *scenario) round(r int) (Round, error) {
	cfg := sc.cfg
	rd := Round{N: r}
	per, errs, stop := sc.startWriters(r)
	time.Sleep(cfg.Before)
	if err := sc.bgsave(r, &rd); err != nil {
		stop()
		return rd, err
	}
	time.Sleep(cfg.After)
	stop()
	for w := range errs {
		if errs[w] != nil {
			return rd, fmt.Errorf("round %d: writer %d: %w", r, w, errs[w])
		}
	}
	if info, err := sc.ctl.Info("stats"); err == nil {
		rd.ForkUsec, _ = strconv.ParseInt(info["latest_fork_usec"], 10, 64)
	}
	// Every writer's ids: the next round starts above the largest.
	var maxN uint64
	for w := range per {
		rd.Writes += len(per[w])
		if uint64(len(per[w])) > maxN {
			maxN = uint64(len(per[w]))
		}
		sc.hist = append(sc.hist, per[w]...)
		sc.res.Ops = append(sc.res.Ops, per[w]...)
	}
	sc.seq += maxN + 1
	return rd, sc.checkRound(r, &rd)
}

// startWriters starts a goroutine per writer that sets random keys of its
// own until stop is called; per and errs get each writer's operations and
// error.
func (sc *scenario) startWriters(r int) (per [][]Op, errs []error, stop func()) {
	cfg := sc.cfg
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	per = make([][]Op, cfg.Writers)
	errs = make([]error, cfg.Writers)
	for w := 0; w < cfg.Writers; w++ {
		wg.Add(1)
		go func(w int, s uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(r)<<32|uint64(w)))
			c := sc.conns[w]
			n := uint64(0)
			mine := (cfg.Keys - w + cfg.Writers - 1) / cfg.Writers
			for {
				select {
				case <-stopped:
					return
				default:
				}
				k := w + cfg.Writers*rng.IntN(mine)
				val := sc.base + (s+n)*uint64(cfg.Writers) + uint64(w)
				n++
				inv := sc.now()
				if _, err := c.Do("SET", KeyName(k), Value(val, cfg.ValueSize)); err != nil {
					errs[w] = err
					return
				}
				per[w] = append(per[w], Op{Writer: w, Key: k, Val: val, Inv: inv, Resp: sc.now()})
			}
		}(w, sc.seq)
	}
	return per, errs, func() {
		close(stopped)
		wg.Wait()
	}
}

// bgsave sends BGSAVE and waits until it finished.
func (sc *scenario) bgsave(r int, rd *Round) error {
	rd.BgInv = sc.now()
	_, err := sc.ctl.Do("BGSAVE")
	rd.BgResp = sc.now()
	if err != nil {
		return fmt.Errorf("round %d: BGSAVE: %w", r, err)
	}
	for {
		info, err := sc.ctl.Info("persistence")
		if err != nil {
			return err
		}
		if info["rdb_bgsave_in_progress"] == "0" {
			rd.BgDone = sc.now()
			if info["rdb_last_bgsave_status"] != "ok" {
				return fmt.Errorf("round %d: BGSAVE failed (rdb_last_bgsave_status %s)", r, info["rdb_last_bgsave_status"])
			}
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkRound keeps round r's RDB file, reads its snapshot back and
// checks that it is a consistent cut of the history.
func (sc *scenario) checkRound(r int, rd *Round) error {
	cfg := sc.cfg
	rdb := filepath.Join(cfg.Dir, fmt.Sprintf("round-%d", r), "round.rdb")
	os.MkdirAll(filepath.Dir(rdb), 0o755)
	if err := os.Rename(filepath.Join(cfg.Dir, "dump.rdb"), rdb); err != nil {
		return fmt.Errorf("round %d: the RDB file: %w", r, err)
	}
	if st, err := os.Stat(rdb); err == nil {
		rd.RDBBytes = st.Size()
	}
	snap, err := ReadRDB(cfg.Bin, rdb, cfg.ValueSize)
	if err != nil {
		return fmt.Errorf("round %d: %w", r, err)
	}
	rd.RDBKeys = len(snap.Vals) + len(snap.Extras)
	if cfg.Corrupt != "" {
		rd.Corrupted = corrupt(cfg.Corrupt, snap, sc.hist, rd.BgInv, rd.BgResp)
	}
	rd.Finding, err = Check(r, cfg.Keys, sc.hist, rd.BgInv, rd.BgResp, snap)
	return err
}

func verdictWord(f *Finding) string {
	if f == nil {
		return "consistent cut"
	}
	return "NOT a consistent cut"
}

// ReadRDB loads rdb into a second redis-server (in a directory of its
// own) and reads every key back.
func ReadRDB(bin Binary, rdb string, valueSize int) (Snapshot, error) {
	snap := Snapshot{Vals: map[int]uint64{}}
	dir := filepath.Dir(rdb)
	srv, err := bin.Start(dir, filepath.Base(rdb))
	if err != nil {
		return snap, fmt.Errorf("load the RDB: %w", err)
	}
	defer srv.Stop()
	c, err := Dial(srv.Sock)
	if err != nil {
		return snap, err
	}
	defer c.Close()
	keys, err := c.Do("KEYS", "*")
	if err != nil {
		return snap, fmt.Errorf("read the RDB: KEYS: %w", err)
	}
	names := make([]string, 0, len(keys.Array))
	for _, k := range keys.Array {
		names = append(names, k.Str)
	}
	sort.Strings(names)
	for i := 0; i < len(names); i += 1000 {
		batch := names[i:min(i+1000, len(names))]
		vals, err := c.Do(append([]string{"MGET"}, batch...)...)
		if err != nil {
			return snap, fmt.Errorf("read the RDB: MGET: %w", err)
		}
		for j, name := range batch {
			k, kerr := strconv.Atoi(name[min(1, len(name)):])
			v, ok := ParseValue(vals.Array[j].Str, valueSize)
			switch {
			case len(name) != 8 || name[0] != 'k' || kerr != nil:
				snap.Extras = append(snap.Extras, fmt.Sprintf("key %q", name))
			case !ok:
				snap.Extras = append(snap.Extras, fmt.Sprintf("key %s holds %.40q", name, vals.Array[j].Str))
			default:
				snap.Vals[k] = v
			}
		}
	}
	return snap, nil
}

// corrupt falsifies snap (TEST ONLY) and says what it did.
func corrupt(how string, snap Snapshot, hist []Op, bgInv, bgResp int64) string {
	last := map[int]Op{}
	for _, o := range hist {
		if p, ok := last[o.Key]; !ok || o.Inv > p.Inv {
			last[o.Key] = o
		}
	}
	switch how {
	case "drop-old":
		// The key whose last write completed longest before BGSAVE.
		best, bestResp := -1, int64(1<<62)
		for k, o := range last {
			if o.Resp < bgInv && o.Resp < bestResp {
				best, bestResp = k, o.Resp
			}
		}
		if best < 0 {
			return "drop-old: no key to drop"
		}
		delete(snap.Vals, best)
		return fmt.Sprintf("dropped %s (last written %s, BGSAVE called at %s)", KeyName(best), fmtT(bestResp), fmtT(bgInv))
	case "later-value":
		for _, o := range hist {
			if o.Inv > bgResp && !o.Load {
				old := snap.Vals[o.Key]
				snap.Vals[o.Key] = o.Val
				return fmt.Sprintf("%s: v%d replaced by v%d (written from %s, after BGSAVE returned at %s)", KeyName(o.Key), old, o.Val, fmtT(o.Inv), fmtT(bgResp))
			}
		}
		return "later-value: no write after BGSAVE"
	}
	return "unknown corruption " + how
}
