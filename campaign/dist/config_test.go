package dist

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

func mustParse(t testing.TB, s string) *prog.Program {
	t.Helper()
	p, err := prog.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseConfig(t *testing.T) {
	const user = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
	c, err := ParseConfig("/etc/ff/coord.conf", []byte(`# coordinator
nkey-user = `+user+`   # an agent
tls-cert = cert.pem
tls-key = /abs/key.pem
listen = 0.0.0.0:4222
store-dir = js
metrics-addr = :9464
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Security: Security{NKeyUsers: []string{user}, TLSCert: "/etc/ff/cert.pem", TLSKey: "/abs/key.pem"},
		Listen: "0.0.0.0:4222", StoreDir: "/etc/ff/js", MetricsAddr: ":9464"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	for _, bad := range []struct{ text, want string }{
		{"token = a\nnkey-user = " + user + "\n", "c.conf:1: field token: a coordinator takes a token or nkey-user keys, not both"},
		{"\n\ncolour = blue\n", "c.conf:3: field colour: unknown key"},
		{"token\n", "c.conf:1: want key = value"},
		{"token = \n", "c.conf:1: field token: empty value"},
		{"token = a\ntoken = b\n", "c.conf:2: field token: set twice (first on line 1)"},
		{"nkey-user = SUAB\n", "c.conf:1: field nkey-user: \"SUAB\" is not an NKey user public key"},
		{"tls-cert = c.pem\n", "field tls-key: tls-cert and tls-key go together"},
		{`token = "a` + "\n", "c.conf:1: field token: unbalanced quote"},
	} {
		_, err := ParseConfig("c.conf", []byte(bad.text))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.text, err, bad.want)
		}
	}
}

func TestParseConfigValues(t *testing.T) {
	got, err := ParseConfig("/etc/ff/a.conf", []byte("token = \"x # y\"\nnkey-seed = agent.nk\ntls-ca = /ca.pem\ncoordinator = tls://c:4222\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Security: Security{Token: "x # y", NKeySeed: "/etc/ff/agent.nk", TLSCA: "/ca.pem"}, Coordinator: "tls://c:4222"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	path := filepath.Join(t.TempDir(), "x.conf")
	os.WriteFile(path, []byte("listen = 127.0.0.1:1\n"), 0o644)
	if c, err := ReadConfig(path); err != nil || c.Listen != "127.0.0.1:1" {
		t.Fatalf("ReadConfig: %+v %v", c, err)
	}
	if _, err := ReadConfig(path + ".missing"); err == nil {
		t.Fatal("missing file read")
	}
}

// Configuration files read values with the target files' grammar
// (internal/kvfile): "#" starts a comment only at the start of a word,
// quotes escape, and words without quotes are one value as written.
func TestParseConfigGrammar(t *testing.T) {
	got, err := ParseConfig("/etc/ff/a.conf", []byte("token = ab#cd # a comment\nstore-dir = /var/lib/my  dir\r\nlisten = \"a \\\"b\\\\\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Security: Security{Token: "ab#cd"}, StoreDir: "/var/lib/my  dir", Listen: `a "b\`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, bad := range []struct{ text, want string }{
		{`token = "a b" c` + "\n", "c.conf:1: field token: want one value, got 2 words"},
		{"listen = \"\" # none\n", "c.conf:1: field listen: empty value"},
		{"two words = x\n", `c.conf:1: want key = value, got "two words = x"`},
		{"\ntoken = a\n\"x = y\n", "c.conf:3: unbalanced quote"},
	} {
		_, err := ParseConfig("c.conf", []byte(bad.text))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.text, err, bad.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("token = a\nlisten = 0.0.0.0:4222 # x\n"))
	f.Add([]byte("nkey-user = UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4\ntls-cert = a\ntls-key = b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("f.conf", b)
		if err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) && (ce.Line < 0 || !strings.HasPrefix(err.Error(), "f.conf:")) {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		if c.Token != "" && len(c.NKeyUsers) > 0 {
			t.Fatal("token and nkey users both accepted")
		}
	})
}

// --config and the files it names (--tls-ca, --nkey-seed, --tls-cert,
// --tls-key) are refused at once when they are no regular file of at most
// MaxConfigFile bytes: a FIFO would block a worker, /dev/zero would grow
// it without end, and neither would heed SIGTERM.
func TestConfigFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	os.WriteFile(huge, []byte("listen = 127.0.0.1:1\n"), 0o644)
	if err := os.Truncate(huge, MaxConfigFile+1<<20); err != nil {
		t.Fatal(err)
	}
	pem := filepath.Join(dir, "ca.pem")
	os.WriteFile(pem, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644)
	for path, want := range map[string]string{
		fifo:        "fifo is a FIFO, want a regular file",
		"/dev/zero": "/dev/zero is a character device, want a regular file",
		dir:         "is a directory, want a regular file",
		huge:        "huge is 2 MiB, larger than the 1 MiB limit",
	} {
		if _, err := ReadConfig(path); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("ReadConfig(%s): %v, want an error saying %q", path, err, want)
		}
		for _, c := range []struct {
			what string
			sec  Security
		}{
			{"nkey seed", Security{NKeySeed: path}}, {"TLS CA", Security{TLSCA: path}},
			{"TLS certificate", Security{TLSCert: path, TLSKey: pem}}, {"TLS key", Security{TLSCert: pem, TLSKey: path}},
		} {
			if err := c.sec.CheckFiles(); err == nil || !strings.Contains(err.Error(), c.what+": ") || !strings.Contains(err.Error(), want) {
				t.Errorf("CheckFiles with %s %s: %v", c.what, path, err)
			}
		}
	}
	if err := (Security{TLSCA: pem, NKeySeed: pem}).CheckFiles(); err != nil {
		t.Errorf("regular files refused: %v", err)
	}
	// Dial checks before it reads: a FIFO CA fails at once.
	done := make(chan error, 1)
	go func() {
		_, err := Dial(context.Background(), "tls://127.0.0.1:1", "t", Security{TLSCA: fifo})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "TLS CA: "+fifo+" is a FIFO") {
			t.Errorf("Dial with a FIFO CA: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Dial blocked on a FIFO CA")
	}
}
