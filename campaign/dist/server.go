package dist

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
)

// Server is the coordinator's embedded NATS server with JetStream.
type Server struct {
	NS *server.Server
	// URL is where agents connect (nats://host:port, tls:// with TLS).
	URL string
	// self is the coordinator's own NKey when the server takes NKeys.
	self nkeys.KeyPair
	sec  Security
}

// ServerConfig configures the embedded server.
type ServerConfig struct {
	Listen   string // host:port; port 0 picks a free one. Default DefaultListen
	StoreDir string // JetStream storage (required)
	Security Security
	// Insecure allows listening beyond the loopback without credentials.
	Insecure bool
	// MaxPayload bounds a message (default DefaultMaxPayload); larger observations
	// go through the object store.
	MaxPayload int32
}

// StartServer starts the embedded server and waits until it accepts
// connections.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("dist: embedded server needs a store directory")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	host, portS, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("dist: listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		return nil, fmt.Errorf("dist: listen address %q: bad port", cfg.Listen)
	}
	if port == 0 {
		port = -1 // the server's "pick a free port"
	}
	sec := cfg.Security
	loop := host == "localhost" || (net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback())
	if !loop && sec.Token == "" && len(sec.NKeyUsers) == 0 && !cfg.Insecure {
		return nil, fmt.Errorf("dist: refusing to listen on %s without --token or --nkey-user (agents on other machines must authenticate); pass --insecure to allow it", cfg.Listen)
	}
	if sec.Token != "" && len(sec.NKeyUsers) > 0 {
		return nil, errors.New("dist: a coordinator takes a token or NKey users, not both")
	}
	opts := &server.Options{
		ServerName: "forkfuzz-coordinator",
		Host:       host, Port: port,
		JetStream: true, StoreDir: cfg.StoreDir,
		MaxPayload: cmp.Or(cfg.MaxPayload, DefaultMaxPayload),
		NoSigs:     true, NoLog: true,
	}
	s := &Server{sec: sec}
	switch {
	case sec.Token != "":
		opts.Authorization = sec.Token
	case len(sec.NKeyUsers) > 0:
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("dist: coordinator nkey: %w", err)
		}
		pub, _ := kp.PublicKey()
		s.self = kp
		for _, u := range append([]string{pub}, sec.NKeyUsers...) {
			if !nkeys.IsValidPublicUserKey(u) {
				return nil, fmt.Errorf("dist: %q is not an NKey user public key", u)
			}
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u})
		}
	}
	if sec.TLSCert != "" {
		if err := sec.CheckFiles(); err != nil {
			return nil, fmt.Errorf("dist: %w", err)
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: sec.TLSCert, KeyFile: sec.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("dist: TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = tc, true, 5
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("dist: embedded server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("dist: embedded server on %s not ready after 30s (port in use?)", cfg.Listen)
	}
	s.NS = ns
	scheme := "nats"
	if opts.TLSConfig != nil {
		scheme = "tls"
	}
	addr := ns.Addr().(*net.TCPAddr)
	h := host
	if h == "" || h == "0.0.0.0" || h == "::" {
		h = "127.0.0.1"
	}
	s.URL = fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(h, strconv.Itoa(addr.Port)))
	return s, nil
}

// Connect opens the coordinator's own in-process connection.
func (s *Server) Connect(name string) (*nats.Conn, error) {
	o := []nats.Option{nats.InProcessServer(s.NS), nats.Name(name), nats.MaxReconnects(-1)}
	switch {
	case s.sec.Token != "":
		o = append(o, nats.Token(s.sec.Token))
	case s.self != nil:
		pub, _ := s.self.PublicKey()
		o = append(o, nats.Nkey(pub, s.self.Sign))
	}
	nc, err := nats.Connect("", o...)
	if err != nil {
		return nil, fmt.Errorf("dist: in-process connection: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.NS.Shutdown()
	s.NS.WaitForShutdown()
}

// ShutdownWithin stops the server, waiting at most d, and reports whether
// it stopped. Everything JetStream acknowledged is on disk already (a
// single server writes before it acknowledges), so a process may exit
// without waiting longer.
func (s *Server) ShutdownWithin(d time.Duration) bool {
	done := make(chan struct{})
	go func() { s.Shutdown(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// DialLog is where Dial says it is waiting for an unreachable
// coordinator (nil: nowhere).
var DialLog io.Writer = os.Stderr

// DialMaxWait bounds Dial's back-off between attempts.
var DialMaxWait = 8 * time.Second

// Dial connects a client (agent, status, a coordinator using an external
// cluster) to url with sec's credentials. It reconnects forever once
// connected. An authentication failure says which flag is missing.
func Dial(ctx context.Context, url, name string, sec Security) (*nats.Conn, error) {
	o := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second)}
	if sec.Token != "" {
		o = append(o, nats.Token(sec.Token))
	}
	if err := sec.CheckFiles(); err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", url, err)
	}
	if sec.NKeySeed != "" {
		opt, err := nats.NkeyOptionFromSeed(sec.NKeySeed)
		if err != nil {
			return nil, fmt.Errorf("coordinator %s: nkey seed %s: %w", url, sec.NKeySeed, err)
		}
		o = append(o, opt)
	}
	if sec.TLSCA != "" {
		pem, err := fsutil.ReadFileLimited(sec.TLSCA, MaxConfigFile)
		if err != nil {
			return nil, fmt.Errorf("coordinator %s: TLS CA: %w", url, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("coordinator %s: TLS CA %s holds no PEM certificate", url, sec.TLSCA)
		}
		o = append(o, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	var nc *nats.Conn
	var err error
	wait, since, said := 500*time.Millisecond, time.Now(), time.Time{}
	for {
		nc, err = nats.Connect(url, o...)
		if err == nil || !errors.Is(err, nats.ErrNoServers) || ctx.Err() != nil {
			break
		}
		// The coordinator may be starting or restarting: keep trying,
		// backing off, and say so (at once, then every minute).
		if DialLog != nil && time.Since(said) >= time.Minute {
			if said.IsZero() {
				fmt.Fprintf(DialLog, "coordinator %s: not reachable (%v); retrying (interrupt to stop)\n", url, err)
			} else {
				fmt.Fprintf(DialLog, "coordinator %s: still not reachable after %v; retrying every %v\n", url, time.Since(since).Round(time.Second), wait)
			}
			said = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, DialMaxWait)
	}
	if err != nil {
		msg := err.Error()
		switch {
		case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(msg), "authorization violation"):
			if sec.Token == "" && sec.NKeySeed == "" {
				return nil, fmt.Errorf("coordinator %s: authorization violation: agent needs --token or --nkey-seed", url)
			}
			return nil, fmt.Errorf("coordinator %s: authorization violation: the coordinator refused this --token/--nkey-seed", url)
		case strings.Contains(msg, "x509") || strings.Contains(msg, "tls"):
			return nil, fmt.Errorf("coordinator %s: TLS: %v (pass the CA that signed the coordinator's certificate with --tls-ca)", url, err)
		}
		return nil, fmt.Errorf("coordinator %s: %w", url, err)
	}
	return nc, nil
}
