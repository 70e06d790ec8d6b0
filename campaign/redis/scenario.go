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
	res := &Result{Config: cfg}
	if info, err := ctl.Info("server"); err == nil {
		res.Version = info["redis_version"]
	}
	t0 := time.Now()
	now := func() int64 { return int64(time.Since(t0)) }
	owner := func(k int) int { return k % cfg.Writers }

	// Load: one pipelined connection, batches of 1000; each key's load
	// write is its owner's first write.
	var hist []Op
	for k := 0; k < cfg.Keys; k += 1000 {
		end := min(k+1000, cfg.Keys)
		inv := now()
		for j := k; j < end; j++ {
			ctl.Send("SET", KeyName(j), Value(uint64(j+1), cfg.ValueSize))
		}
		if err := ctl.Flush(); err != nil {
			return nil, err
		}
		for j := k; j < end; j++ {
			if _, err := ctl.Read(); err != nil {
				return nil, fmt.Errorf("load: %w", err)
			}
		}
		resp := now()
		for j := k; j < end; j++ {
			hist = append(hist, Op{Writer: owner(j), Key: j, Val: uint64(j + 1), Inv: inv, Resp: resp, Load: true})
		}
	}
	res.LoadNs = now()
	if info, err := ctl.Info("memory"); err == nil {
		res.UsedMem = info["used_memory_human"]
	}
	fmt.Fprintf(cfg.Log, "redis: %s loaded %d keys of %d bytes in %v (used_memory %s); seed %d\n",
		res.Version, cfg.Keys, cfg.ValueSize, time.Duration(res.LoadNs).Round(time.Millisecond), res.UsedMem, cfg.Seed)

	conns := make([]*Conn, cfg.Writers)
	for w := range conns {
		if conns[w], err = Dial(srv.Sock); err != nil {
			return nil, err
		}
		defer conns[w].Close()
	}
	var seq uint64 // value ids above the load's, per writer interleaved
	base := uint64(cfg.Keys) + 1
	for r := 1; r <= cfg.Rounds; r++ {
		rd := Round{N: r}
		var wg sync.WaitGroup
		stopped := make(chan struct{})
		per := make([][]Op, cfg.Writers)
		errs := make([]error, cfg.Writers)
		for w := 0; w < cfg.Writers; w++ {
			wg.Add(1)
			go func(w int, s uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(r)<<32|uint64(w)))
				c := conns[w]
				n := uint64(0)
				mine := (cfg.Keys - w + cfg.Writers - 1) / cfg.Writers
				for {
					select {
					case <-stopped:
						return
					default:
					}
					k := w + cfg.Writers*rng.IntN(mine)
					val := base + (s+n)*uint64(cfg.Writers) + uint64(w)
					n++
					inv := now()
					if _, err := c.Do("SET", KeyName(k), Value(val, cfg.ValueSize)); err != nil {
						errs[w] = err
						return
					}
					per[w] = append(per[w], Op{Writer: w, Key: k, Val: val, Inv: inv, Resp: now()})
				}
			}(w, seq)
		}
		time.Sleep(cfg.Before)
		rd.BgInv = now()
		rep, err := ctl.Do("BGSAVE")
		rd.BgResp = now()
		if err != nil {
			close(stopped)
			wg.Wait()
			return nil, fmt.Errorf("round %d: BGSAVE: %w", r, err)
		}
		_ = rep
		for {
			info, err := ctl.Info("persistence")
			if err != nil {
				close(stopped)
				wg.Wait()
				return nil, err
			}
			if info["rdb_bgsave_in_progress"] == "0" {
				rd.BgDone = now()
				if info["rdb_last_bgsave_status"] != "ok" {
					close(stopped)
					wg.Wait()
					return nil, fmt.Errorf("round %d: BGSAVE failed (rdb_last_bgsave_status %s)", r, info["rdb_last_bgsave_status"])
				}
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(cfg.After)
		close(stopped)
		wg.Wait()
		for w := range errs {
			if errs[w] != nil {
				return nil, fmt.Errorf("round %d: writer %d: %w", r, w, errs[w])
			}
		}
		if info, err := ctl.Info("stats"); err == nil {
			rd.ForkUsec, _ = strconv.ParseInt(info["latest_fork_usec"], 10, 64)
		}
		// Every writer's ids: the next round starts above the largest.
		var maxN uint64
		for w := range per {
			rd.Writes += len(per[w])
			if uint64(len(per[w])) > maxN {
				maxN = uint64(len(per[w]))
			}
			hist = append(hist, per[w]...)
			res.Ops = append(res.Ops, per[w]...)
		}
		seq += maxN + 1
		rdb := filepath.Join(cfg.Dir, fmt.Sprintf("round-%d", r), "round.rdb")
		os.MkdirAll(filepath.Dir(rdb), 0o755)
		if err := os.Rename(filepath.Join(cfg.Dir, "dump.rdb"), rdb); err != nil {
			return nil, fmt.Errorf("round %d: the RDB file: %w", r, err)
		}
		if st, err := os.Stat(rdb); err == nil {
			rd.RDBBytes = st.Size()
		}
		snap, err := ReadRDB(cfg.Bin, rdb, cfg.ValueSize)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", r, err)
		}
		rd.RDBKeys = len(snap.Vals) + len(snap.Extras)
		if cfg.Corrupt != "" {
			rd.Corrupted = corrupt(cfg.Corrupt, snap, hist, rd.BgInv, rd.BgResp)
		}
		rd.Finding, err = Check(r, cfg.Keys, hist, rd.BgInv, rd.BgResp, snap)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "redis: round %d: BGSAVE call %v, child done after %v, latest_fork_usec %d, %d writes, RDB %d bytes %d keys: %s\n",
			r, time.Duration(rd.BgResp-rd.BgInv), time.Duration(rd.BgDone-rd.BgInv).Round(time.Millisecond), rd.ForkUsec, rd.Writes, rd.RDBBytes, rd.RDBKeys, verdictWord(rd.Finding))
		res.Rounds = append(res.Rounds, rd)
	}
	return res, nil
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
