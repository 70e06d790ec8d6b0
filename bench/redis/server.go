// Package redis is the seeds' own scenario (forkfuzz redis): a real
// redis-server (Debian's, fetched with apt-get download and unpacked, never
// installed) holding N keys takes BGSAVE snapshots while writers change
// keys with every command's start and end recorded. Two promises are
// checked and measured:
//
//   - the snapshot is right: the RDB file each BGSAVE wrote, loaded by a
//     second real redis-server and read back key by key, must be a
//     consistent cut of the write history at an instant inside the BGSAVE
//     command (checker/cut's rule: every write completed before it
//     present, none that started after it, never a later write of a key
//     without an earlier one);
//   - it is fast: per-command latency percentiles during and outside
//     BGSAVE, with Redis's own latest_fork_usec.
package redis

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Packages are the Debian packages the scenario unpacks.
var Packages = []string{"redis-server", "redis-tools", "libjemalloc2", "liblzf1"}

// Binary is a redis-server to run.
type Binary struct {
	Path   string
	LibDir string // added to LD_LIBRARY_PATH ("" for a system binary)
}

// DefaultCache is where Fetch unpacks: $FORKFUZZ_REDIS_CACHE, else
// ~/.cache/forkfuzz/redis.
func DefaultCache() string {
	if d := os.Getenv("FORKFUZZ_REDIS_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "forkfuzz", "redis")
	}
	return filepath.Join(os.TempDir(), "forkfuzz-redis")
}

// Find looks for the unpacked redis-server in cache, then on PATH.
func Find(cache string) (Binary, error) {
	p := filepath.Join(cache, "root", "usr", "bin", "redis-server")
	if _, err := os.Stat(p); err == nil {
		return Binary{Path: p, LibDir: filepath.Join(cache, "root", "usr", "lib", "x86_64-linux-gnu")}, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return Binary{Path: p}, nil
	}
	return Binary{}, fmt.Errorf("no redis-server in %s or on PATH (run 'forkfuzz redis --fetch' or .ci/deps: apt-get download %s, unpacked with dpkg-deb -x)", cache, strings.Join(Packages, " "))
}

// Fetch downloads the packages with apt-get download into cache and
// unpacks them with dpkg-deb -x (nothing is installed).
func Fetch(cache string) (Binary, error) {
	if err := os.MkdirAll(filepath.Join(cache, "debs"), 0o755); err != nil {
		return Binary{}, err
	}
	dl := exec.Command("apt-get", append([]string{"download"}, Packages...)...)
	dl.Dir = filepath.Join(cache, "debs")
	if out, err := dl.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("apt-get download %s: %v: %s (run apt-get update first?)", strings.Join(Packages, " "), err, strings.TrimSpace(string(out)))
	}
	debs, _ := filepath.Glob(filepath.Join(cache, "debs", "*.deb"))
	for _, d := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", d, filepath.Join(cache, "root")).CombinedOutput(); err != nil {
			return Binary{}, fmt.Errorf("dpkg-deb -x %s: %v: %s", d, err, out)
		}
	}
	return Find(cache)
}

// Server is a running redis-server on a unix socket.
type Server struct {
	Sock string
	Dir  string
	cmd  *exec.Cmd
	log  *os.File
}

// Start runs redis-server with no persistence of its own (BGSAVE only when
// asked), on a unix socket in dir, its RDB file dir/dbfile.
func (b Binary) Start(dir, dbfile string, extra ...string) (*Server, error) {
	sock := filepath.Join(dir, "redis.sock")
	os.Remove(sock)
	args := append([]string{"--port", "0", "--unixsocket", sock, "--dir", dir, "--dbfilename", dbfile,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "", "--loglevel", "warning",
		"--rdbcompression", "no"}, extra...)
	cmd := exec.Command(b.Path, args...)
	if b.LibDir != "" {
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+b.LibDir)
	}
	log, err := os.Create(filepath.Join(dir, "redis-"+strings.TrimSuffix(dbfile, ".rdb")+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", b.Path, err)
	}
	s := &Server{Sock: sock, Dir: dir, cmd: cmd, log: log}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			log.Close()
			b, _ := os.ReadFile(log.Name())
			return nil, fmt.Errorf("redis-server exited at start (%v): %s", err, lastLines(string(b), 5))
		default:
		}
		if c, err := Dial(sock); err == nil {
			r, err := c.Do("PING")
			c.Close()
			if err == nil && r.Str == "PONG" {
				go func() { <-exited }()
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, errors.New("redis-server did not answer PING within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	s.log.Close()
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// Conn is a minimal RESP2 client on one connection.
type Conn struct {
	c   net.Conn
	buf []byte
	r   *reader
}

// Reply is one RESP reply.
type Reply struct {
	Kind  byte // '+', '-', ':', '$', '*'
	Str   string
	Int   int64
	Nil   bool
	Array []Reply
}

// Dial connects to a unix socket.
func Dial(sock string) (*Conn, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: newReader(c)}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Send queues one command (call Flush, then Read for each).
func (c *Conn) Send(args ...string) {
	c.buf = append(c.buf, '*')
	c.buf = strconv.AppendInt(c.buf, int64(len(args)), 10)
	c.buf = append(c.buf, '\r', '\n')
	for _, a := range args {
		c.buf = append(c.buf, '$')
		c.buf = strconv.AppendInt(c.buf, int64(len(a)), 10)
		c.buf = append(c.buf, '\r', '\n')
		c.buf = append(c.buf, a...)
		c.buf = append(c.buf, '\r', '\n')
	}
}

// Flush writes queued commands.
func (c *Conn) Flush() error {
	_, err := c.c.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// Read reads one reply; a server error reply is returned as an error.
func (c *Conn) Read() (Reply, error) {
	r, err := c.r.reply()
	if err == nil && r.Kind == '-' {
		return r, fmt.Errorf("redis: %s", r.Str)
	}
	return r, err
}

// Do sends one command and reads its reply.
func (c *Conn) Do(args ...string) (Reply, error) {
	c.Send(args...)
	if err := c.Flush(); err != nil {
		return Reply{}, err
	}
	return c.Read()
}

// Info returns INFO section's fields.
func (c *Conn) Info(section string) (map[string]string, error) {
	r, err := c.Do("INFO", section)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(r.Str, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}
