package stream_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testkafka"
)

// secured returns the package broker's SASL_SSL listener.
func secured(t *testing.T) *testkafka.Secured {
	t.Helper()
	b := broker(t)
	if b.Secure == nil {
		t.Fatal("the package broker has no SASL_SSL listener (TestMain starts it with testkafka.Options.Secure)")
	}
	return b.Secure
}

// secureKafkaConfig is a server config with one table consuming topic
// through the SASL_SSL listener; tlsExtra and sasl are YAML flow mappings'
// contents added to the source's tls and sasl sections.
func secureKafkaConfig(sec *testkafka.Secured, topic, group, tlsExtra, sasl string) string {
	return fmt.Sprintf(`tables:
  - name: events
    hashBy: user
    sortBy: ts
    on_bad_line: reject
    sources:
      - kafka:
          brokers: [%s]
          topics: [%s]
          group: %s
          session_timeout: 6s
          tls: {ca_file: %q, cert_file: %q, key_file: %q%s}
          sasl: {%s}
`, sec.Addr, topic, group, sec.CAFile, sec.ClientCertFile, sec.ClientKeyFile, tlsExtra, sasl)
}

// unsecuredJWT is a token the broker's unsecured OAUTHBEARER validator
// accepts: an unsigned JWT with a subject and an expiry.
func unsecuredJWT(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, now, now+3600)) + "."
}

// TestKafkaSASLSSL: a node consumes a topic through the broker's SASL_SSL
// listener (a test CA, a client certificate, the broker's certificate
// naming only its server name) with each SASL mechanism, the secret given
// by file or environment variable: every message is stored, and the
// secret appears nowhere in the node's log.
func TestKafkaSASLSSL(t *testing.T) {
	t.Parallel()
	sec := secured(t)
	const n, users = 200, 10
	topic := uniqueName("sasl")
	createTopic(t, topic)
	produceRange(t, newProducer(t), topic, 0, n, users)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "kafka-password")
	if err := os.WriteFile(pwFile, []byte(sec.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := unsecuredJWT("sluice")
	env := []string{"SLUICE_TEST_KAFKA_TOKEN=" + token}
	for _, c := range []struct{ mechanism, sasl, secret string }{
		{"PLAIN", fmt.Sprintf("mechanism: PLAIN, username: %s, password: {file: %q}", sec.User, pwFile), sec.Password},
		{"SCRAM-SHA-256", fmt.Sprintf("mechanism: SCRAM-SHA-256, username: %s, password: {file: %q}", sec.User, pwFile), sec.Password},
		{"SCRAM-SHA-512", fmt.Sprintf("mechanism: SCRAM-SHA-512, username: %s, password: {file: %q}", sec.User, pwFile), sec.Password},
		{"OAUTHBEARER", "mechanism: OAUTHBEARER, token: {env: SLUICE_TEST_KAFKA_TOKEN}", token},
	} {
		t.Run(c.mechanism, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "node")
			cfg := secureKafkaConfig(sec, topic, uniqueName("g"), fmt.Sprintf(", server_name: %s", sec.ServerName), c.sasl)
			nd := startNodeEnv(t, cfg, data, env)
			waitRows(t, nd, "events", n, time.Minute)
			nd.stop()
			ids, _ := storedIDs(t, data, "events")
			checkExactlyOnce(t, ids, n)
			logText, err := os.ReadFile(nd.Log)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(logText), c.secret) {
				t.Errorf("the node's log holds the %s secret", c.mechanism)
			}
		})
	}
}

// TestKafkaSASLSSLRefused: with a wrong password, a CA that did not sign
// the broker's certificate, no server name (the certificate does not name
// 127.0.0.1), or a password file that is not there, nothing is stored and
// /readyz fails naming the cause;
// the wrong password is not in /readyz's answer or the log.
func TestKafkaSASLSSLRefused(t *testing.T) {
	t.Parallel()
	sec := secured(t)
	topic := uniqueName("refused")
	createTopic(t, topic)
	produceRange(t, newProducer(t), topic, 0, 10, 2)
	const wrong = "not-the-Pa55word"
	env := []string{"SLUICE_TEST_KAFKA_WRONG=" + wrong}
	serverName := ", server_name: " + sec.ServerName
	scram := fmt.Sprintf("mechanism: SCRAM-SHA-512, username: %s, password: {env: SLUICE_TEST_KAFKA_WRONG}", sec.User)
	for _, c := range []struct {
		name, tlsExtra, sasl, want string
		caFile                     string
	}{
		{"wrong password", serverName, scram, "SASL_AUTHENTICATION_FAILED", sec.CAFile},
		{"wrong CA", serverName, scram, "certificate signed by unknown authority", sec.OtherCAFile},
		{"no server name", "", scram, "cannot validate certificate for 127.0.0.1", sec.CAFile},
		{"password file missing", serverName, fmt.Sprintf("mechanism: SCRAM-SHA-256, username: %s, password: {file: /nonexistent/kafka-password}", sec.User), "secret file: open /nonexistent/kafka-password", sec.CAFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := strings.Replace(secureKafkaConfig(sec, topic, uniqueName("g"), c.tlsExtra, c.sasl), sec.CAFile, c.caFile, 1)
			data := filepath.Join(t.TempDir(), "node")
			nd := startNodeEnv(t, cfg, data, env)
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

// waitNotReady waits until the node's /readyz fails with want in its
// answer, and returns the answer.
func waitNotReady(t *testing.T, nd *node, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := http.Get(nd.URL + "/readyz")
		if err != nil {
			t.Fatalf("readyz: %v: %s", err, nd.Tail())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), want) {
			return string(body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not fail naming %q in %v; last answer: %s\nlog: %s", want, timeout, last, nd.Tail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
