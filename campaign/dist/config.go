package dist

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/forkfuzz/forkfuzz/internal/fsutil"
	"github.com/forkfuzz/forkfuzz/internal/kvfile"
)

// Security is how the coordinator's server and every client authenticate
// and encrypt. A coordinator accepts either a token or a set of NKey public
// keys (not both); an agent presents a token or an NKey seed.
type Security struct {
	Token     string   // shared secret (server and client)
	NKeySeed  string   // client: file holding the client's NKey seed ("SU...")
	NKeyUsers []string // server: public keys ("U...") allowed to connect
	TLSCert   string   // server: certificate (PEM)
	TLSKey    string   // server: private key (PEM)
	TLSCA     string   // client: CA that signed the server's certificate
}

// Config is a configuration file's content: security plus the addresses
// that flags would otherwise give.
type Config struct {
	Security
	Listen      string // coordinator: where the embedded server listens
	Coordinator string // agent, status: URL of the coordinator's server
	StoreDir    string // coordinator: JetStream storage
	MetricsAddr string // where Prometheus metrics are served
}

// ConfigError names the file, line and field of a configuration mistake:
// the same error as a target file's.
type ConfigError = kvfile.Error

// ReadConfig reads a configuration file: "key = value" lines, "#"
// comments, values optionally in double quotes (the grammar of target
// files, internal/kvfile: \" and \\ escape inside quotes, "#" starts a
// comment at the start of a word). A value is one word, or words without
// quotes taken as written (store-dir = /var/lib/my dir). Relative paths
// are taken relative to the file.
//
//	token = s3cret
//	nkey-seed = agent.nk
//	nkey-user = UABC...        # repeatable
//	tls-cert = server.pem
//	tls-key = server-key.pem
//	tls-ca = ca.pem
//	listen = 0.0.0.0:4222
//	coordinator = nats://coord.example:4222
//	store-dir = /var/lib/forkfuzz/js
//	metrics-addr = :9464
//
// The file, and the files it names, must be regular files of at most
// MaxConfigFile bytes (CheckFiles).
func ReadConfig(path string) (*Config, error) {
	b, err := fsutil.ReadFileLimited(path, MaxConfigFile)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, b)
}

// MaxConfigFile bounds a configuration file and the key and certificate
// files it names (PEM files and NKey seeds are a few KB).
const MaxConfigFile = 1 << 20

// CheckFiles checks that the files sec names (NKey seed, TLS certificate,
// key and CA) are regular files of at most MaxConfigFile bytes: the NATS
// libraries read them whole, and a FIFO or /dev/zero there would hang a
// worker that a signal could not stop.
func (sec Security) CheckFiles() error {
	for _, f := range []struct{ what, path string }{
		{"nkey seed", sec.NKeySeed}, {"TLS certificate", sec.TLSCert}, {"TLS key", sec.TLSKey}, {"TLS CA", sec.TLSCA},
	} {
		if f.path == "" {
			continue
		}
		if err := fsutil.CheckRegular(f.path, MaxConfigFile); err != nil {
			return fmt.Errorf("%s: %w", f.what, err)
		}
	}
	return nil
}

// ParseConfig parses the content of a configuration file named name.
func ParseConfig(name string, b []byte) (*Config, error) {
	c := &Config{}
	seen := map[string]int{}
	if err := kvfile.Each(name, b, func(l kvfile.Line) error { return c.set(l, seen) }); err != nil {
		return nil, configWording(err)
	}
	if c.Token != "" && len(c.NKeyUsers) > 0 {
		return nil, &ConfigError{Path: name, Line: seen["token"], Field: "token", Msg: "a coordinator takes a token or nkey-user keys, not both"}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		l, f := seen["tls-cert"]+seen["tls-key"], "tls-cert"
		if c.TLSCert != "" {
			f = "tls-key"
		}
		return nil, &ConfigError{Path: name, Line: l, Field: f, Msg: "tls-cert and tls-key go together"}
	}
	return c, nil
}

// set applies one line of a configuration file; seen maps the keys set
// so far to their lines.
func (c *Config) set(l kvfile.Line, seen map[string]int) error {
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(l.Path), p)
	}
	val, err := configValue(l)
	if err != nil {
		return err
	}
	if prev, dup := seen[l.Key]; dup && l.Key != "nkey-user" {
		return l.Errorf("set twice (first on line %d)", prev)
	}
	seen[l.Key] = l.N
	switch l.Key {
	case "token":
		c.Token = val
	case "nkey-seed":
		c.NKeySeed = rel(val)
	case "nkey-user":
		if !nkeys.IsValidPublicUserKey(val) {
			return l.Errorf("%q is not an NKey user public key (U...)", val)
		}
		c.NKeyUsers = append(c.NKeyUsers, val)
	case "tls-cert":
		c.TLSCert = rel(val)
	case "tls-key":
		c.TLSKey = rel(val)
	case "tls-ca":
		c.TLSCA = rel(val)
	case "listen":
		c.Listen = val
	case "coordinator":
		c.Coordinator = val
	case "store-dir":
		c.StoreDir = rel(val)
	case "metrics-addr":
		c.MetricsAddr = val
	default:
		return l.Errorf("unknown key (want token, nkey-seed, nkey-user, tls-cert, tls-key, tls-ca, listen, coordinator, store-dir or metrics-addr)")
	}
	return nil
}

// configValue is a line's one value: its one word, or its words as
// written when there are several and no quotes.
func configValue(l kvfile.Line) (string, error) {
	v := ""
	switch {
	case len(l.Words) == 1:
		v = l.Words[0]
	case len(l.Words) > 1 && !strings.ContainsRune(l.Value, '"'):
		v = l.Value
	case len(l.Words) > 1:
		return "", l.Errorf("want one value, got %d words (quote the whole value)", len(l.Words))
	}
	if v == "" {
		return "", l.Errorf("empty value")
	}
	return v, nil
}

// configWording words kvfile's syntax errors the way configuration files
// always have (TestParseConfig pins it): "want key = value", and an open
// quote is the value's fault.
func configWording(err error) error {
	var e *ConfigError
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(e.Err, kvfile.ErrSyntax):
		e.Msg = fmt.Sprintf("want key = value, got %q", e.Text)
	case errors.Is(e.Err, kvfile.ErrQuote):
		if k, _, ok := kvfile.Cut(e.Text); ok {
			e.Field = k
		}
		e.Msg = "unbalanced quote"
	}
	return e
}
