package testkafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Secured is a broker's SASL_SSL listener, as managed Kafka services run
// it: TLS with a certificate of a test CA that names ServerName only (not
// 127.0.0.1: a client must set the server name to verify it), client
// certificates required, and SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
// OAUTHBEARER (the broker's unsecured token validator: an unsigned JWT
// with a sub claim passes).
type Secured struct {
	// Addr is the listener, 127.0.0.1:port.
	Addr string
	// ServerName is the one name the broker's certificate carries.
	ServerName string
	// CAFile signs the broker's and the client's certificates;
	// OtherCAFile is an unrelated CA that signed neither (a wrong CA).
	CAFile, OtherCAFile string
	// ClientCertFile and ClientKeyFile are a client certificate the
	// listener accepts.
	ClientCertFile, ClientKeyFile string
	// User and Password log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
	User, Password string
}

// The secured listener's name and user.
const (
	secureServerName = "broker.sluice.test"
	secureUser       = "sluice-user"
	securePassword   = "s3cret-Pa55word-for-tests"
)

// writeCerts makes the test CAs and the broker's and a client's
// certificates under dir as PEM files and returns the listener's
// description (Addr unset) and the broker's key-and-chain file.
func writeCerts(dir string) (*Secured, string, error) {
	s := &Secured{ServerName: secureServerName, User: secureUser, Password: securePassword,
		CAFile: filepath.Join(dir, "ca.pem"), OtherCAFile: filepath.Join(dir, "other-ca.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client-key.pem")}
	ca, caKey, err := newCert("sluice test CA", nil, nil, nil, true)
	if err != nil {
		return nil, "", err
	}
	other, _, err := newCert("an unrelated CA", nil, nil, nil, true)
	if err != nil {
		return nil, "", err
	}
	broker, brokerKey, err := newCert(secureServerName, []string{secureServerName}, ca, caKey, false)
	if err != nil {
		return nil, "", err
	}
	client, clientKey, err := newCert("sluice test client", nil, ca, caKey, false)
	if err != nil {
		return nil, "", err
	}
	brokerPEM := filepath.Join(dir, "broker.pem")
	for _, f := range []struct {
		path   string
		blocks []*pem.Block
	}{
		{s.CAFile, []*pem.Block{certBlock(ca)}},
		{s.OtherCAFile, []*pem.Block{certBlock(other)}},
		{s.ClientCertFile, []*pem.Block{certBlock(client)}},
		{s.ClientKeyFile, []*pem.Block{keyBlock(clientKey)}},
		// Kafka's PEM keystore: the key (PKCS#8, unencrypted) then the chain.
		{brokerPEM, []*pem.Block{keyBlock(brokerKey), certBlock(broker), certBlock(ca)}},
	} {
		var data []byte
		for _, b := range f.blocks {
			if b == nil {
				return nil, "", fmt.Errorf("testkafka: encoding %s", f.path)
			}
			data = append(data, pem.EncodeToMemory(b)...)
		}
		if err := os.WriteFile(f.path, data, 0o600); err != nil {
			return nil, "", err
		}
	}
	return s, brokerPEM, nil
}

// newCert makes a certificate for name (a CA when isCA) signed by parent,
// or self-signed when parent is nil.
func newCert(name string, dnsNames []string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("testkafka: certificate %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func certBlock(c *x509.Certificate) *pem.Block {
	return &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}
}

func keyBlock(k *ecdsa.PrivateKey) *pem.Block {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil
	}
	return &pem.Block{Type: "PRIVATE KEY", Bytes: der}
}

// secureProps are the server.properties lines of the SASL_SSL listener.
func secureProps(brokerPEM, caFile string) string {
	const jaas = "listener.name.sasl_ssl.%s.sasl.jaas.config=%s required%s;\n"
	return "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER\n" +
		fmt.Sprintf(jaas, "plain", "org.apache.kafka.common.security.plain.PlainLoginModule", fmt.Sprintf(` user_%s="%s"`, secureUser, securePassword)) +
		fmt.Sprintf(jaas, "scram-sha-256", "org.apache.kafka.common.security.scram.ScramLoginModule", "") +
		fmt.Sprintf(jaas, "scram-sha-512", "org.apache.kafka.common.security.scram.ScramLoginModule", "") +
		fmt.Sprintf(jaas, "oauthbearer", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", ` unsecuredLoginStringClaim_sub="broker"`) +
		"listener.name.sasl_ssl.ssl.client.auth=required\n" +
		"ssl.keystore.type=PEM\nssl.keystore.location=" + brokerPEM + "\n" +
		"ssl.truststore.type=PEM\nssl.truststore.location=" + caFile + "\n"
}

// scramArgs are StorageTool format's arguments that create the SCRAM user.
func scramArgs() []string {
	var args []string
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, secureUser, securePassword))
	}
	return args
}
