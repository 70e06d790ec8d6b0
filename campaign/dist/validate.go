package dist

import (
	"fmt"

	"github.com/nats-io/nkeys"

	"github.com/forkfuzz/forkfuzz/internal/fielderr"
)

// The defaults of the addresses: where a coordinator's embedded server
// listens (StartServer), and where a client looks for it without a
// configured coordinator (forkfuzz status).
const (
	DefaultListen = "127.0.0.1:4222"
	// DefaultMaxPayload bounds a NATS message and a stream entry (8 MiB);
	// larger observations go through the object store.
	DefaultMaxPayload  = 8 << 20
	DefaultCoordinator = "nats://127.0.0.1:4222"
)

// FieldError is a Config field whose value Validate rejects.
type FieldError = fielderr.FieldError

// Validate checks c as a whole, after flags were merged over a file
// (ParseConfig checks a file alone, naming its lines): a token and NKey
// users do not go together, a TLS certificate needs its key and the key
// its certificate, and every NKey user is a user public key. It returns
// a *FieldError.
func (c *Config) Validate() error {
	if c.Token != "" && len(c.NKeyUsers) > 0 {
		return &FieldError{Field: "Token", Msg: ": a coordinator takes a token or nkey-user keys, not both"}
	}
	for _, u := range c.NKeyUsers {
		if !nkeys.IsValidPublicUserKey(u) {
			return &FieldError{Field: "NKeyUsers", Msg: fmt.Sprintf(": %q is not an NKey user public key (U...)", u)}
		}
	}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		return &FieldError{Field: "TLSKey", Msg: ": missing: tls-cert and tls-key go together"}
	case c.TLSKey != "" && c.TLSCert == "":
		return &FieldError{Field: "TLSCert", Msg: ": missing: tls-cert and tls-key go together"}
	}
	return nil
}
