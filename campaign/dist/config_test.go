package dist

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
