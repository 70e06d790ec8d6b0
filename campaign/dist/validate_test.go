package dist

import (
	"errors"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestConfigValidate(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	user, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		cfg   Config
		field string // "" when valid
		msg   string
	}{
		{"empty", Config{}, "", ""},
		{"token", Config{Security: Security{Token: "s3cret"}, Listen: DefaultListen}, "", ""},
		{"nkey users", Config{Security: Security{NKeyUsers: []string{user}}}, "", ""},
		{"tls", Config{Security: Security{TLSCert: "c.pem", TLSKey: "k.pem", TLSCA: "ca.pem"}}, "", ""},
		{"client", Config{Security: Security{NKeySeed: "agent.nk"}, Coordinator: DefaultCoordinator}, "", ""},
		{"token and users", Config{Security: Security{Token: "s3cret", NKeyUsers: []string{user}}}, "Token",
			"Token: a coordinator takes a token or nkey-user keys, not both"},
		{"bad user", Config{Security: Security{NKeyUsers: []string{user, "SUABC"}}}, "NKeyUsers",
			`NKeyUsers: "SUABC" is not an NKey user public key (U...)`},
		{"cert alone", Config{Security: Security{TLSCert: "c.pem"}}, "TLSKey", "TLSKey: missing: tls-cert and tls-key go together"},
		{"key alone", Config{Security: Security{TLSKey: "k.pem"}}, "TLSCert", "TLSCert: missing: tls-cert and tls-key go together"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want valid", c.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || err.Error() != c.msg {
			t.Errorf("%s: %v, want %q (field %s)", c.name, err, c.msg, c.field)
		}
	}
}
