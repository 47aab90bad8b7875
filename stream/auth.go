package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The SASL mechanisms KafkaConn speaks.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLOAuthBearer = "OAUTHBEARER"
)

// ErrSASLMechanism is returned for a mechanism KafkaConn does not speak.
var ErrSASLMechanism = errors.New("unknown SASL mechanism")

// KafkaConn is how every Kafka client of a source (the group consumer, its
// admin client, the key routing's metadata lookups) reaches and proves
// itself to the brokers. The zero value is plaintext without SASL.
type KafkaConn struct {
	// TLS, when set, wraps every connection (its verification settings
	// are the caller's: the server never turns verification off).
	TLS *tls.Config
	// Mechanism is a SASL mechanism (SASLPlain, SASLScramSHA256,
	// SASLScramSHA512, SASLOAuthBearer); empty: no SASL.
	Mechanism string
	// Username is PLAIN's and SCRAM's user.
	Username string
	// Secret returns the password (PLAIN, SCRAM) or the bearer token
	// (OAUTHBEARER). It is called at every authentication, so that a
	// rotated password file or renewed token is picked up by the next
	// connection without a restart.
	Secret func() (string, error)
}

// ClientOpts returns franz-go's options that make a client connect as c
// says; the caller adds seed brokers and the rest.
func (c KafkaConn) ClientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.Mechanism == "" {
		return opts, nil
	}
	if c.Secret == nil {
		return nil, fmt.Errorf("stream: kafka sasl %s: no secret", c.Mechanism)
	}
	secret := func() (string, error) {
		s, err := c.Secret()
		if err != nil {
			return "", fmt.Errorf("stream: kafka sasl %s: %w", c.Mechanism, err)
		}
		return s, nil
	}
	var m sasl.Mechanism
	switch c.Mechanism {
	case SASLPlain:
		m = plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := secret()
			return plain.Auth{User: c.Username, Pass: pw}, err
		})
	case SASLScramSHA256, SASLScramSHA512:
		fn := func(context.Context) (scram.Auth, error) {
			pw, err := secret()
			return scram.Auth{User: c.Username, Pass: pw}, err
		}
		if c.Mechanism == SASLScramSHA256 {
			m = scram.Sha256(fn)
		} else {
			m = scram.Sha512(fn)
		}
	case SASLOAuthBearer:
		m = oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			token, err := secret()
			return oauth.Auth{Token: token}, err
		})
	default:
		return nil, fmt.Errorf("stream: kafka sasl %q: %w (want one of %v)", c.Mechanism, ErrSASLMechanism,
			[]string{SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer})
	}
	return append(opts, kgo.SASL(m)), nil
}

// newClient opens a client of the brokers with c's connection options
// before extra.
func (c KafkaConn) newClient(brokers []string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.ClientOpts()
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(slices.Concat([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts, extra)...)
}
