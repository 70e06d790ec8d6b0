package dist

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths (the certificate is its own CA).
func selfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "forkfuzz test coordinator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

func nkeySeedFile(t *testing.T) (pub, seedFile string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile = filepath.Join(t.TempDir(), "agent.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, seedFile
}

func TestSecurity(t *testing.T) {
	cert, key := selfSigned(t)
	pub, seed := nkeySeedFile(t)
	_, otherSeed := nkeySeedFile(t)
	cases := []struct {
		name    string
		server  Security
		client  Security
		wantErr string // "" : connects, reads the store
	}{
		{"token", Security{Token: "s3cret"}, Security{Token: "s3cret"}, ""},
		{"token missing", Security{Token: "s3cret"}, Security{}, "authorization violation: agent needs --token or --nkey-seed"},
		{"token wrong", Security{Token: "s3cret"}, Security{Token: "guess"}, "refused this --token/--nkey-seed"},
		{"nkey", Security{NKeyUsers: []string{pub}}, Security{NKeySeed: seed}, ""},
		{"nkey missing", Security{NKeyUsers: []string{pub}}, Security{}, "agent needs --token or --nkey-seed"},
		{"nkey unknown", Security{NKeyUsers: []string{pub}}, Security{NKeySeed: otherSeed}, "refused"},
		{"tls+token", Security{Token: "t", TLSCert: cert, TLSKey: key}, Security{Token: "t", TLSCA: cert}, ""},
		{"tls without CA", Security{Token: "t", TLSCert: cert, TLSKey: key}, Security{Token: "t"}, "--tls-ca"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := testServer(t, c.server)
			if c.server.TLSCert != "" && !strings.HasPrefix(srv.URL, "tls://") {
				t.Fatalf("TLS server URL %s", srv.URL)
			}
			// The coordinator's own connection always works.
			own, err := srv.Connect("coordinator")
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			testStore(t, own)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			nc, err := Dial(ctx, srv.URL, "agent", c.client)
			if c.wantErr != "" {
				if err == nil {
					nc.Close()
					t.Fatalf("connected; want an error containing %q", c.wantErr)
				}
				if !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), srv.URL) {
					t.Fatalf("error %q does not name the URL and %q", err, c.wantErr)
				}
				t.Logf("refused as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			st := testStore(t, nc)
			if _, err := ReadStatus(ctx, st); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestServerRefusesOpenListen(t *testing.T) {
	_, err := StartServer(ServerConfig{Listen: "0.0.0.0:0", StoreDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("listening on all interfaces without credentials: %v", err)
	}
	if _, err := StartServer(ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Security: Security{Token: "a", NKeyUsers: []string{"U"}}}); err == nil {
		t.Fatal("token and nkeys together accepted")
	}
}
