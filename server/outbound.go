package server

import (
	"crypto/tls"
	"fmt"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/ingest/schemaformat"
	"github.com/sluicedb/sluice/internal/coldapi"
	"github.com/sluicedb/sluice/internal/tlsfiles"
	"github.com/sluicedb/sluice/stream"
)

// clientTLS is the TLS config of a connection sluice opens, from its tls:
// section; nil for none. The CA file is read now (a bad file stops the
// start with its name); the client certificate is read now (checked) and
// again at a handshake when its files changed, so that a renewed
// certificate needs no restart.
func clientTLS(c *config.ClientTLS) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	cfg, certs, err := tlsfiles.ClientConfig(tlsfiles.ClientOptions{
		CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile, ServerName: c.ServerName,
	})
	if err != nil {
		return nil, err
	}
	if c.MinVersion == "1.3" {
		cfg.MinVersion = tls.VersionTLS13
	}
	if certs != nil {
		// A handshake looks at the files first (their size and time: a
		// stat), so a renewed certificate is used from the next
		// connection on; a renewal that does not load keeps the last one.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			certs.Reload(false)
			return certs.GetClientCertificate(nil)
		}
	}
	return cfg, nil
}

// kafkaConn is stream's connection options of a sources[].kafka section.
func kafkaConn(k config.KafkaSource) (stream.KafkaConn, error) {
	tlsCfg, err := clientTLS(k.TLS)
	if err != nil {
		return stream.KafkaConn{}, err
	}
	c := stream.KafkaConn{TLS: tlsCfg}
	if s := k.SASL; s != nil {
		c.Mechanism, c.Username, c.Secret = s.Mechanism, s.Username, s.Password.Reveal
		if s.Mechanism == stream.SASLOAuthBearer {
			c.Secret = s.Token.Reveal
		}
	}
	return c, nil
}

// schemaRegistry is the registry options of a sources[].kafka section's
// schema_registry (none: the zero Registry, which the Schema Registry
// formats refuse and the others ignore).
func schemaRegistry(r *config.SchemaRegistry) (schemaformat.Registry, error) {
	if r == nil {
		return schemaformat.Registry{}, nil
	}
	tlsCfg, err := clientTLS(r.TLS)
	if err != nil {
		return schemaformat.Registry{}, fmt.Errorf("schema_registry tls: %w", err)
	}
	reg := schemaformat.Registry{URLs: r.URLs, Username: r.Username, TLS: tlsCfg, Timeout: r.Timeout}
	if r.Password.IsSet() {
		reg.Password = r.Password.Reveal
	}
	if r.Token.IsSet() {
		reg.Token = r.Token.Reveal
	}
	return reg, nil
}

// natsConn is stream's connection options of a sources[].nats section.
func natsConn(n config.NATSSource) (stream.NATSConn, error) {
	tlsCfg, err := clientTLS(n.TLS)
	if err != nil {
		return stream.NATSConn{}, err
	}
	c := stream.NATSConn{TLS: tlsCfg, User: n.User, NKeySeedFile: n.NKeySeedFile, CredsFile: n.CredsFile}
	if n.Password.IsSet() {
		c.Password = n.Password.Reveal
	}
	if n.Token.IsSet() {
		c.Token = n.Token.Reveal
	}
	return c, nil
}

// catalogSecrets sets the secrets of an Iceberg catalog section on c.
func catalogSecrets(ic config.IcebergCatalog, c *coldapi.Catalog) {
	for _, s := range []struct {
		from config.Secret
		to   *func() (string, error)
	}{{ic.Token, &c.Token}, {ic.Credential, &c.Credential}, {ic.Password, &c.Password}} {
		if s.from.IsSet() {
			*s.to = s.from.Reveal
		}
	}
}
