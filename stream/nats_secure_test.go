package stream_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/sluicedb/sluice/internal/testcert"
)

// securedNATS are the package's NATS servers that require TLS and
// credentials: users holds a user with a password and an nkey user, and
// requires client certificates; tokens requires a token; operator trusts
// an operator whose account signed the user of credsFile (decentralized
// auth, as nsc sets it up).
type securedNATS struct {
	users, tokens, operator string // URLs
	certs                   *testcert.Files
	dir                     string
	user, password, token   string
	nkeySeedFile, credsFile string
}

var (
	secureNATSOnce sync.Once
	secureNATS     *securedNATS
	secureNATSErr  error
)

// natsSecured starts the package's secured NATS servers on first use (in
// process, as the plain one; they stop with the test binary).
func natsSecured(t *testing.T) *securedNATS {
	t.Helper()
	secureNATSOnce.Do(func() { secureNATS, secureNATSErr = startSecuredNATS() })
	if secureNATSErr != nil {
		t.Fatalf("secured NATS servers: %v", secureNATSErr)
	}
	return secureNATS
}

func startSecuredNATS() (*securedNATS, error) {
	dir, err := os.MkdirTemp("", "stream-nats-secure-")
	if err != nil {
		return nil, err
	}
	s := &securedNATS{dir: dir, user: "sluice", password: "nats-Pa55word-for-tests", token: "nats-t0ken-for-tests"}
	if s.certs, err = testcert.Write(dir, "nats.sluice.test"); err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	s.nkeySeedFile = filepath.Join(dir, "user.nk")
	if err := os.WriteFile(s.nkeySeedFile, seed, 0o600); err != nil {
		return nil, err
	}
	start := func(name string, verify bool, o natsserver.Options) (string, error) {
		tlsCfg, err := natsserver.GenTLSConfig(&natsserver.TLSConfigOpts{CertFile: s.certs.ServerCertFile, KeyFile: s.certs.ServerKeyFile, CaFile: s.certs.CAFile, Verify: verify})
		if err != nil {
			return "", err
		}
		o.Host, o.Port, o.JetStream, o.StoreDir, o.NoSigs, o.NoLog = "127.0.0.1", -1, true, filepath.Join(dir, name), true, true
		o.TLS, o.TLSConfig, o.TLSVerify, o.TLSTimeout = true, tlsCfg, verify, 5
		ns, err := natsserver.NewServer(&o)
		if err != nil {
			return "", err
		}
		ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			return "", fmt.Errorf("nats server %s not ready", name)
		}
		return ns.ClientURL(), nil
	}
	if s.users, err = start("users", true, natsserver.Options{
		Users: []*natsserver.User{{Username: s.user, Password: s.password}},
		Nkeys: []*natsserver.NkeyUser{{Nkey: pub}},
	}); err != nil {
		return nil, err
	}
	if s.tokens, err = start("tokens", false, natsserver.Options{Authorization: s.token}); err != nil {
		return nil, err
	}
	operator, system, resolver, err := s.writeCreds()
	if err != nil {
		return nil, err
	}
	if s.operator, err = start("operator", false, natsserver.Options{TrustedOperators: []*jwt.OperatorClaims{operator}, AccountResolver: resolver, SystemAccount: system}); err != nil {
		return nil, err
	}
	return s, nil
}

// writeCreds makes an operator, a system account and an account with
// JetStream that it signs, and a user of that account whose JWT and seed go
// to s.credsFile; it returns the operator's claims, the system account and
// a resolver that knows both accounts.
func (s *securedNATS) writeCreds() (_ *jwt.OperatorClaims, system string, _ natsserver.AccountResolver, _ error) {
	op, err := nkeys.CreateOperator()
	if err != nil {
		return nil, "", nil, err
	}
	opPub, _ := op.PublicKey()
	operator := jwt.NewOperatorClaims(opPub)
	acc, err := nkeys.CreateAccount()
	if err != nil {
		return nil, "", nil, err
	}
	accPub, _ := acc.PublicKey()
	account := jwt.NewAccountClaims(accPub)
	account.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := account.Encode(op)
	if err != nil {
		return nil, "", nil, err
	}
	resolver := &natsserver.MemAccResolver{}
	if err := resolver.Store(accPub, accJWT); err != nil {
		return nil, "", nil, err
	}
	sys, err := nkeys.CreateAccount()
	if err != nil {
		return nil, "", nil, err
	}
	sysPub, _ := sys.PublicKey()
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(op)
	if err != nil {
		return nil, "", nil, err
	}
	if err := resolver.Store(sysPub, sysJWT); err != nil {
		return nil, "", nil, err
	}
	usr, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", nil, err
	}
	usrPub, _ := usr.PublicKey()
	usrSeed, _ := usr.Seed()
	usrJWT, err := jwt.NewUserClaims(usrPub).Encode(acc)
	if err != nil {
		return nil, "", nil, err
	}
	creds, err := jwt.FormatUserConfig(usrJWT, usrSeed)
	if err != nil {
		return nil, "", nil, err
	}
	s.credsFile = filepath.Join(s.dir, "user.creds")
	return operator, sysPub, resolver, os.WriteFile(s.credsFile, creds, 0o600)
}

// TestNATSSecured: a node consumes a JetStream stream over TLS with a user
// and password (from a file), an nkey seed file, a token (from the
// environment) or a creds file (decentralized auth): every message is
// stored once, and no secret is in the node's log.
func TestNATSSecured(t *testing.T) {
	t.Parallel()
	s := natsSecured(t)
	pwFile := filepath.Join(t.TempDir(), "nats-password")
	if err := os.WriteFile(pwFile, []byte(s.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"SLUICE_TEST_NATS_TOKEN=" + s.token}
	clientTLS := fmt.Sprintf("tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: %s}", s.certs.CAFile, s.certs.ClientCertFile, s.certs.ClientKeyFile, s.certs.ServerName)
	const n = 300
	for _, c := range []struct {
		name, url, auth string
		connect         nats.Option
		secret          string
	}{
		{"user and password", s.users, fmt.Sprintf("user: %s, password: {file: %q}, %s", s.user, pwFile, clientTLS), nats.UserInfo(s.user, s.password), s.password},
		{"nkey", s.users, fmt.Sprintf("nkey_seed_file: %q, %s", s.nkeySeedFile, clientTLS), nkeyOption(t, s.nkeySeedFile), ""},
		{"token", s.tokens, fmt.Sprintf("token: {env: SLUICE_TEST_NATS_TOKEN}, tls: {ca_file: %q, server_name: %s}", s.certs.CAFile, s.certs.ServerName), nats.Token(s.token), s.token},
		{"creds file", s.operator, fmt.Sprintf("creds_file: %q, tls: {ca_file: %q, server_name: %s}", s.credsFile, s.certs.CAFile, s.certs.ServerName), nats.UserCredentials(s.credsFile), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			stream := publishSecured(t, s, c.url, c.connect, n)
			data := filepath.Join(t.TempDir(), "node")
			nd := startNodeEnv(t, securedNATSConfig(c.url, stream, c.auth), data, env)
			waitRows(t, nd, "events", n, time.Minute)
			nd.stop()
			ids, _ := storedIDs(t, data, "events")
			checkExactlyOnce(t, ids, n)
			if logText, _ := os.ReadFile(nd.Log); c.secret != "" && strings.Contains(string(logText), c.secret) {
				t.Errorf("the node's log holds the secret")
			}
		})
	}
}

// TestNATSSecuredRefused: without credentials, with a wrong password, or
// trusting a CA that did not sign the server's certificate, nothing is
// stored and /readyz fails naming the cause (never the password).
func TestNATSSecuredRefused(t *testing.T) {
	t.Parallel()
	s := natsSecured(t)
	const wrong = "not-the-nats-Pa55word"
	env := []string{"SLUICE_TEST_NATS_WRONG=" + wrong}
	clientTLS := func(ca string) string {
		return fmt.Sprintf("tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: %s}", ca, s.certs.ClientCertFile, s.certs.ClientKeyFile, s.certs.ServerName)
	}
	stream := publishSecured(t, s, s.users, nats.UserInfo(s.user, s.password), 10)
	for _, c := range []struct{ name, auth, want string }{
		{"no credentials", clientTLS(s.certs.CAFile), "Authorization Violation"},
		{"wrong password", fmt.Sprintf("user: %s, password: {env: SLUICE_TEST_NATS_WRONG}, %s", s.user, clientTLS(s.certs.CAFile)), "Authorization Violation"},
		{"wrong CA", fmt.Sprintf("user: %s, password: {env: SLUICE_TEST_NATS_WRONG}, %s", s.user, clientTLS(s.certs.OtherCAFile)), "certificate signed by unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "node")
			nd := startNodeEnv(t, securedNATSConfig(s.users, stream, c.auth), data, env)
			body := waitNotReady(t, nd, c.want, 45*time.Second)
			if strings.Contains(body, wrong) {
				t.Errorf("/readyz shows the password: %s", body)
			}
			nd.stop()
			if ids, _ := storedIDs(t, data, "events"); len(ids) != 0 {
				t.Errorf("%d rows stored", len(ids))
			}
			if logText, _ := os.ReadFile(nd.Log); strings.Contains(string(logText), wrong) {
				t.Errorf("the node's log holds the password")
			}
		})
	}
}

func nkeyOption(t *testing.T, seedFile string) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// publishSecured makes a stream of its own on the server at url and
// publishes n events to it, connecting with auth over TLS.
func publishSecured(t *testing.T, s *securedNATS, url string, auth nats.Option, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(s.certs.CAFile)
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("CA file: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(s.certs.ClientCertFile, s.certs.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, auth, nats.Secure(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: s.certs.ServerName}))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream := uniqueName("SECURE")
	subject := strings.ToLower(stream)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		_, v := event(i, 10)
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.u%d", subject, i%10), v); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	return stream
}

func securedNATSConfig(url, stream, auth string) string {
	return fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    sources:
      - nats: {url: %q, stream: %s, subject: "%s.>", durable: sluice, max_batch: 100, %s}
`, url, stream, strings.ToLower(stream), auth)
}
